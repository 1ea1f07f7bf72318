-- Reads for a membership view (src/registry/MembershipView.ts), one bounded page per call.
-- ARGV: T, now, what, from, limit, minLeaseLeftMs.
--   what "log": the records changed after sequence `from`, in log order:
--     {gen, seq, trim, worker, present, mkeys, headroom, draining, degraded, nackStart, nackCount, ns, worker, ...,
--      "|", seq, ...}: after the records and a "|", each record's sequence number, in the same
--     order (the last one is where the next page starts)
--   what "members": the records of the workers after worker id `from` ("" first), in id order,
--     with the same header.
--   what "short": the workers whose lease left at now is below the minimum, from offset `from`.
local what, from, limit = ARGV[3], ARGV[4], tonumber(ARGV[5])
local out = { redis.call("GET", T .. ":cold") or "", redis.call("GET", T .. ":seq") or "0", redis.call("GET", T .. ":trim") or "0" }

local function record(worker)
  local w = redis.call("HMGET", T .. ":w:" .. worker, "mkeys", "headroom", "draining", "degraded", "nackStart", "nackCount", "ns")
  out[#out + 1] = worker
  if w[1] then
    out[#out + 1] = "1"
    out[#out + 1] = string.gsub(w[1], "\n", " ")
    for i = 2, 7 do out[#out + 1] = w[i] end
  else
    for _ = 1, 8 do out[#out + 1] = "" end
    out[#out - 7] = "0"
  end
end

if what == "log" then
  local entries = redis.call("ZRANGEBYSCORE", T .. ":chg", "(" .. from, "+inf", "WITHSCORES", "LIMIT", 0, limit)
  local seqs = {}
  for i = 1, #entries, 2 do
    record(entries[i])
    seqs[#seqs + 1] = entries[i + 1]
  end
  out[#out + 1] = "|"
  for _, seq in ipairs(seqs) do out[#out + 1] = seq end
elseif what == "members" then
  local after = from == "" and "-" or "(" .. from
  for _, worker in ipairs(redis.call("ZRANGEBYLEX", T .. ":wi", after, "+", "LIMIT", 0, limit)) do record(worker) end
else
  local bound = "(" .. string.format("%d", now + tonumber(ARGV[6]))
  for _, worker in ipairs(redis.call("ZRANGEBYSCORE", T .. ":wl", "-inf", bound, "LIMIT", tonumber(from), limit)) do
    out[#out + 1] = worker
  end
end
return out
