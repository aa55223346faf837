-- Reserves an amount at every level of one chain, or nothing.
-- KEYS[1..n]: the levels' hashes, root first; KEYS[n+1]: the reservation;
-- KEYS[n+2]: the tree's deadlines (a sorted set).
-- ARGV: amount, max_open, deadline_ms, id, record (JSON), limit_1..limit_n.
-- A level's hash: l (limit), s (spent), r (reserved), o (open reservations).
local n = #KEYS - 2
local amount = tonumber(ARGV[1])
local max_open = tonumber(ARGV[2])
local limits = {}
for i = 1, n do
  local presented = ARGV[5 + i]
  local v = redis.call('HMGET', KEYS[i], 'l', 's', 'r', 'o')
  local limit = presented
  if v[1] and tonumber(v[1]) < tonumber(presented) then limit = v[1] end
  local spent = tonumber(v[2] or '0')
  local reserved = tonumber(v[3] or '0')
  local open = tonumber(v[4] or '0')
  if spent + reserved + amount > tonumber(limit) then
    return {'exceeded', i, limit, v[2] or '0', v[3] or '0'}
  end
  if open >= max_open then
    return {'too_many_open', i, open}
  end
  limits[i] = limit
end
for i = 1, n do
  redis.call('HSET', KEYS[i], 'l', limits[i])
  redis.call('HINCRBY', KEYS[i], 'r', ARGV[1])
  redis.call('HINCRBY', KEYS[i], 'o', 1)
end
redis.call('SET', KEYS[n + 1], ARGV[5])
redis.call('ZADD', KEYS[n + 2], ARGV[3], ARGV[4])
return {'ok'}
