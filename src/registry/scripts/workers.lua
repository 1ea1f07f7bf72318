-- ARGV: T, now. Every worker record of the bucket: {worker, url, ns, headroom, lease, draining, degraded, nackStart, nackCount}...
local out = {}
for _, worker in ipairs(redis.call("SMEMBERS", T .. ":workers")) do
  local w = redis.call("HMGET", T .. ":w:" .. worker, "url", "ns", "headroom", "lease", "draining", "degraded", "nackStart", "nackCount")
  out[#out + 1] = { worker, w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8] }
end
return out
