#!/usr/bin/env bash
# Two builds side by side, alternating, on the same machine in one sitting:
#   benches/compare.sh OLD_BIN_DIR NEW_BIN_DIR
# (each holding release `dgw` and `dgw-load`; build an older commit with
# `git worktree add /tmp/old REV && (cd /tmp/old && cargo build --release)`).
# Runs ROUNDS (default 3) rounds of MODE (authorize or grpc, default
# authorize): a fresh gateway per run, 64 clients for 6 s after a 1 s
# warm-up, and prints throughput, latency and the gateway's CPU time.
# OLD_EXTRA / NEW_EXTRA add config lines to each build's gateway (an older
# build refuses keys it does not know); NEW_EXTRA defaults to letting every
# reservation stay open, as runs without --settle did before
# budget.max_open_reservations existed.
set -e
old=$1 new=$2
mode=${MODE:-authorize}
NEW_EXTRA=${NEW_EXTRA-$'[budget]\nmax_open_reservations = 1000000000'}
run() {
  local bin=$1 extra=$2 label=$3 work root pid addr grpc token target a b out
  work=$(mktemp -d)
  root=$($bin/dgw keygen --out "$work/root.key" 2>/dev/null)
  cat > "$work/g.toml" <<TOML
data_dir = "$work/data"
key_file = "$work/data/gateway.key"
[server]
http = "127.0.0.1:0"
grpc = "127.0.0.1:0"
[[tenants]]
name = "bench"
root = "$root"
$extra
TOML
  $bin/dgw serve --config "$work/g.toml" > "$work/out" 2>/dev/null &
  pid=$!
  for _ in $(seq 100); do grep -q listening "$work/out" 2>/dev/null && break; sleep 0.1; done
  addr=$(sed -n 's/^dgw listening http=\([^ ]*\).*/\1/p' "$work/out")
  grpc=$(sed -n 's/.* grpc=\([^ ]*\).*/\1/p' "$work/out")
  token=$($bin/dgw token issue --key "$work/root.key" --to "$root" --cap 'docs:read:/**' \
    --contract ct_000000000001 --delegation del_000000000001 --budget 9000000000000000 \
    --max-depth 1 --ttl 1h 2>/dev/null)
  if [ "$mode" = grpc ]; then target=$grpc; else target=$addr; fi
  a=$(awk '{print $14+$15}' /proc/$pid/stat)
  out=$($bin/dgw-load --mode "$mode" --addr "$target" --token "$token" --concurrency 64 \
    --duration 6s --warmup 1s 2>&1 | tr '\n' ' ')
  b=$(awk '{print $14+$15}' /proc/$pid/stat)
  echo "$label: $out gateway cpu $(( (b-a)*10 )) ms (warm-up included)"
  kill $pid; wait $pid 2>/dev/null || true
  rm -rf "$work"
}
for _ in $(seq "${ROUNDS:-3}"); do
  run "$old" "${OLD_EXTRA:-}" old
  run "$new" "$NEW_EXTRA" new
done
