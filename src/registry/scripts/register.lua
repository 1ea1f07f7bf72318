-- ARGV: T, now, worker, incarnation, advertiseUrl, leaseExpiresAt, headroom, draining, namespacesJson, mkeys
local worker = ARGV[3]
touch()
local wkey = T .. ":w:" .. worker
local previous = redis.call("HMGET", wkey, "mkeys", "nackStart", "nackCount")
if previous[1] then
  leaveMemberships(worker, previous[1])
  deleteRowsOf(worker)
end
redis.call("DEL", wkey)
redis.call("HSET", wkey,
  "inc", ARGV[4], "url", ARGV[5], "lease", ARGV[6], "headroom", ARGV[7], "draining", ARGV[8],
  "degraded", "0", "ns", ARGV[9], "mkeys", ARGV[10],
  "nackStart", previous[2] or "0", "nackCount", previous[3] or "0")
redis.call("SADD", T .. ":workers", worker)
for _, mk in ipairs(lines(ARGV[10])) do
  redis.call("SADD", T .. ":ns", mk)
  redis.call("ZADD", T .. ":m:" .. mk, 0, worker)
end
return "OK"
