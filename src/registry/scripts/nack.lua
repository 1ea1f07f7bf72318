-- ARGV: T, now, worker, nackWindowMs. A fixed window opened by the first refusal.
local wkey = T .. ":w:" .. ARGV[3]
local record = redis.call("HMGET", wkey, "nackStart", "nackCount")
if not record[1] then return "OK" end
if now < tonumber(record[1]) + tonumber(ARGV[4]) then
  redis.call("HSET", wkey, "nackCount", tostring(tonumber(record[2]) + 1))
else
  redis.call("HSET", wkey, "nackStart", nowText, "nackCount", "1")
end
return "OK"
