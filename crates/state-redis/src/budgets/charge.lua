-- Charges an amount at every level of one chain if it fits at each.
-- KEYS[1..n]: the levels' hashes. ARGV: amount, limit_1..limit_n.
local amount = tonumber(ARGV[1])
local limits = {}
for i = 1, #KEYS do
  local presented = ARGV[1 + i]
  local v = redis.call('HMGET', KEYS[i], 'l', 's', 'r')
  local limit = presented
  if v[1] and tonumber(v[1]) < tonumber(presented) then limit = v[1] end
  if tonumber(v[2] or '0') + tonumber(v[3] or '0') + amount > tonumber(limit) then
    return {'exceeded', i, limit, v[2] or '0', v[3] or '0'}
  end
  limits[i] = limit
end
for i = 1, #KEYS do
  redis.call('HSET', KEYS[i], 'l', limits[i])
  redis.call('HINCRBY', KEYS[i], 's', ARGV[1])
end
return {'ok'}
