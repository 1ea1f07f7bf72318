-- ARGV: T, now, worker, incarnation, leaseExpiresAt, headroom, draining, degraded
-- Answers {"renewed", env, ns, id, epoch, deadline, ...} or {"lost"}.
local worker = ARGV[3]
touch()
local wkey = T .. ":w:" .. worker
local record = redis.call("HMGET", wkey, "inc", "lease")
if not record[1] or record[1] ~= ARGV[4] or tonumber(record[2]) <= now then return { "lost" } end
redis.call("HSET", wkey, "lease", ARGV[5], "headroom", ARGV[6], "draining", ARGV[7], "degraded", ARGV[8])
local out = { "renewed" }
for _, rk in ipairs(redis.call("ZRANGEBYSCORE", T .. ":wd", "(" .. nowText, "+inf")) do
  local row = redis.call("HMGET", T .. ":p:" .. rk, "worker", "env", "ns", "id", "epoch", "wd")
  if row[1] == worker then
    for i = 2, 6 do out[#out + 1] = row[i] end
  end
end
return out
