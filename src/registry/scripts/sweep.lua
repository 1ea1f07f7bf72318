-- ARGV: T, now. Removes lapsed workers with their rows, and rows past their wind-down deadline.
for _, worker in ipairs(redis.call("SMEMBERS", T .. ":workers")) do
  if tonumber(redis.call("HGET", T .. ":w:" .. worker, "lease")) <= now then removeWorker(worker) end
end
for _, rk in ipairs(redis.call("ZRANGEBYSCORE", T .. ":wd", "-inf", nowText)) do
  deleteRow(rk, redis.call("HGET", T .. ":p:" .. rk, "worker"))
end
return "OK"
