-- ARGV: T, now, env, namespace, id, epoch, tag. Compare-and-set: {"done"} or {"conflict", current?}.
touch()
local pkey = T .. ":p:" .. ARGV[3] .. "|" .. ARGV[4] .. "|" .. ARGV[5]
local current = redis.call("HGET", pkey, "epoch")
if not current or current ~= ARGV[6] then return { "conflict", current } end
redis.call("HSET", pkey, "tag", ARGV[7])
return { "done" }
