-- ARGV: T, now, env, namespace, id. The row's fields, its owner's url and liveness; {} if none.
local row = currentRow(ARGV[3] .. "|" .. ARGV[4] .. "|" .. ARGV[5], "epoch", "placedAt", "host", "tag", "wd")
if not row then return {} end
local owner = redis.call("HMGET", T .. ":w:" .. row[1], "inc", "lease", "url")
return { row[1], row[2], row[3], row[4], row[5], row[6], row[7], owner[3], rowLive(owner, row[2], row[7]) and "1" or "0" }
