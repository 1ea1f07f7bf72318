-- ARGV: T, now, env, namespace, id, epoch, deadline. {"winding", deadline} or {"conflict", current?}.
touch()
local rk = ARGV[3] .. "|" .. ARGV[4] .. "|" .. ARGV[5]
local row = currentRow(rk, "epoch", "wd")
if not row or row[3] ~= ARGV[6] then return { "conflict", row and row[3] } end
if row[4] ~= "0" then return { "winding", row[4] } end
redis.call("HSET", T .. ":p:" .. rk, "wd", ARGV[7])
redis.call("ZADD", T .. ":wd", ARGV[7], rk)
redis.call("ZADD", T .. ":wdw:" .. row[1], ARGV[7], rk)
return { "winding", ARGV[7] }
