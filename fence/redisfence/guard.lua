-- KEYS[1]: the fence (a hash: epoch, token); KEYS[2]: the key written.
-- ARGV: epoch, token (decimal, no leading zeros), mode ("set", "hset",
-- "none"), then set: value, ttl in ms (0: none); hset: field, value.
-- Returns {1} when written, {0, epoch, token} of the fence when refused.
-- Decimals are compared as strings: exact beyond 2^53.
local function less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
local f = redis.call('HMGET', KEYS[1], 'epoch', 'token')
local epoch, token = ARGV[1], ARGV[2]
if f[1] and f[2] then
  if less(epoch, f[1]) or (epoch == f[1] and less(token, f[2])) then
    return {0, f[1], f[2]}
  end
end
redis.call('HSET', KEYS[1], 'epoch', epoch, 'token', token)
local mode = ARGV[3]
if mode == 'set' then
  if ARGV[5] ~= '0' then
    redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
  else
    redis.call('SET', KEYS[2], ARGV[4])
  end
elseif mode == 'hset' then
  redis.call('HSET', KEYS[2], ARGV[4], ARGV[5])
end
return {1}
