-- ARGV: T, now (unused), then worker ids. How many placement rows of the bucket name each
-- worker: the set resolve.lua adds a row to and deleteRow removes it from (an ended
-- incarnation's set is renamed away by retireRows). One SCARD per worker asked for.
local out = {}
for i = 3, #ARGV do
  out[#out + 1] = redis.call("SCARD", T .. ":r:" .. ARGV[i])
end
return out
