-- ARGV: T, now, env, namespace, id, epoch, tag. Compare-and-set: {"done"} or {"conflict", current?}.
touch()
local rk = ARGV[3] .. "|" .. ARGV[4] .. "|" .. ARGV[5]
local row = currentRow(rk, "epoch")
if not row or row[3] ~= ARGV[6] then return { "conflict", row and row[3] } end
redis.call("HSET", T .. ":p:" .. rk, "tag", ARGV[7])
return { "done" }
