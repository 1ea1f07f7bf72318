-- ARGV: T, now, env, namespace, id, epoch, then an owner grant or nothing (common.lua
-- heldByAnother). Compare-and-delete: {"done"}, {"conflict", current?}, or {"held"} for a row
-- whose worker the grant does not cover, checked before the epoch (so it tells no epoch).
touch()
local rk = ARGV[3] .. "|" .. ARGV[4] .. "|" .. ARGV[5]
local row = currentRow(rk, "epoch")
if row and heldByAnother(7, row[1]) then return { "held" } end
if not row or row[3] ~= ARGV[6] then return { "conflict", row and row[3] } end
deleteRow(rk, row[1])
return { "done" }
