-- ARGV: T, now, env, namespace, id, epoch. Compare-and-delete: {"done"} or {"conflict", current?}.
touch()
local rk = ARGV[3] .. "|" .. ARGV[4] .. "|" .. ARGV[5]
local row = currentRow(rk, "epoch")
if not row or row[3] ~= ARGV[6] then return { "conflict", row and row[3] } end
deleteRow(rk, row[1])
return { "done" }
