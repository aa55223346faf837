-- Ends an open reservation: settled (at most its amount charged),
-- released, or expired (charged in full or released, as it says).
-- KEYS[1]: the reservation; KEYS[2]: the tree's deadlines.
-- ARGV: mode (settle | settle_charged | release | expire), actual,
-- the level key prefix, id, now_ms.
local raw = redis.call('GET', KEYS[1])
if not raw then return {'unknown'} end
local rec = cjson.decode(raw)
local amount = rec.amount
local mode = ARGV[1]
local charge = 0
if mode == 'expire' then
  if rec.deadline_ms > tonumber(ARGV[5]) then return {'not_due'} end
  if rec.on_expiry == 'charge' then charge = amount end
elseif mode ~= 'release' then
  charge = tonumber(ARGV[2])
  if mode == 'settle_charged' and rec.on_expiry ~= 'charge' then return {'not_charged'} end
  if charge > amount then return {'exceeds', string.format('%d', amount)} end
end
for _, level in ipairs(rec.levels) do
  local key = ARGV[3] .. level[1]
  redis.call('HINCRBY', key, 'r', string.format('%d', -amount))
  redis.call('HINCRBY', key, 'o', -1)
  if charge > 0 then redis.call('HINCRBY', key, 's', string.format('%d', charge)) end
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[4])
return {'ok', string.format('%d', amount), string.format('%d', charge)}
