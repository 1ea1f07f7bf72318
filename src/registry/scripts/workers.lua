-- ARGV: T, now, after (a worker id, "" for the first page), limit. The bucket's worker records
-- in worker id order after `after`: {worker, url, ns, headroom, lease, draining, degraded,
-- nackStart, nackCount}...
local after = ARGV[3]
local from = after == "" and "-" or "(" .. after
local out = {}
for _, worker in ipairs(redis.call("ZRANGEBYLEX", T .. ":wi", from, "+", "LIMIT", 0, tonumber(ARGV[4]))) do
  local w = redis.call("HMGET", T .. ":w:" .. worker, "url", "ns", "headroom", "lease", "draining", "degraded", "nackStart", "nackCount")
  out[#out + 1] = { worker, w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8] }
end
return out
