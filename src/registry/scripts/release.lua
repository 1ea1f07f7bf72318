-- ARGV: T, now, env, namespace, id, epoch. Compare-and-delete: {"done"} or {"conflict", current?}.
touch()
local rk = ARGV[3] .. "|" .. ARGV[4] .. "|" .. ARGV[5]
local row = redis.call("HMGET", T .. ":p:" .. rk, "epoch", "worker")
if not row[1] or row[1] ~= ARGV[6] then return { "conflict", row[1] } end
deleteRow(rk, row[2])
return { "done" }
