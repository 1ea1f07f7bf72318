-- ARGV: T, now, env, namespace, id, and optionally a worker. The row's fields, its owner's url
-- and liveness; {} if none. With a worker, {that, {its incarnation, its caller key}}: the second
-- {} when the bucket has no record of the worker or its record no caller key.
local function placed()
  local row = currentRow(ARGV[3] .. "|" .. ARGV[4] .. "|" .. ARGV[5], "epoch", "placedAt", "host", "tag", "wd")
  if not row then return {} end
  local owner = redis.call("HMGET", T .. ":w:" .. row[1], "inc", "lease", "url")
  return { row[1], row[2], row[3], row[4], row[5], row[6], row[7], owner[3], rowLive(owner, row[2], row[7]) and "1" or "0" }
end

local answer = placed()
if not ARGV[6] then return answer end
local caller = redis.call("HMGET", T .. ":w:" .. ARGV[6], "inc", "ck")
return { answer, caller[2] and { caller[1], caller[2] } or {} }
