-- ARGV: T, now, worker, incarnation. Every placement of that incarnation ends now.
local worker = ARGV[3]
if redis.call("HGET", T .. ":w:" .. worker, "inc") == ARGV[4] then removeWorker(worker) end
return "OK"
