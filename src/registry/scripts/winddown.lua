-- ARGV: T, now, env, namespace, id, epoch, deadline. {"winding", deadline} or {"conflict", current?}.
touch()
local rk = ARGV[3] .. "|" .. ARGV[4] .. "|" .. ARGV[5]
local pkey = T .. ":p:" .. rk
local row = redis.call("HMGET", pkey, "epoch", "wd")
if not row[1] or row[1] ~= ARGV[6] then return { "conflict", row[1] } end
if row[2] ~= "0" then return { "winding", row[2] } end
redis.call("HSET", pkey, "wd", ARGV[7])
redis.call("ZADD", T .. ":wd", ARGV[7], rk)
return { "winding", ARGV[7] }
