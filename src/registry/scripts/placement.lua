-- ARGV: T, now, env, namespace, id. The row's fields, its owner's url and liveness; {} if none.
local row = redis.call("HMGET", T .. ":p:" .. ARGV[3] .. "|" .. ARGV[4] .. "|" .. ARGV[5],
  "worker", "inc", "epoch", "placedAt", "host", "tag", "wd")
if not row[1] then return {} end
local owner = redis.call("HMGET", T .. ":w:" .. row[1], "inc", "lease", "url")
row[8] = owner[3] or ""
row[9] = rowLive(owner, row[2], row[7]) and "1" or "0"
return row
