-- ARGV: T, now, env, namespace, id, epoch, tag, then an owner grant or nothing (common.lua
-- heldByAnother). Compare-and-set: {"done"}, {"conflict", current?}, or {"held"} as release.lua.
touch()
local rk = ARGV[3] .. "|" .. ARGV[4] .. "|" .. ARGV[5]
local row = currentRow(rk, "epoch")
if row and heldByAnother(8, row[1]) then return { "held" } end
if not row or row[3] ~= ARGV[6] then return { "conflict", row and row[3] } end
redis.call("HSET", T .. ":p:" .. rk, "tag", ARGV[7])
return { "done" }
