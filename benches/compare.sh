#!/usr/bin/env bash
# Two builds side by side, alternating, on the same machine in one sitting:
#   benches/compare.sh OLD_BIN_DIR NEW_BIN_DIR
# (each holding release `dgw` and `dgw-load`; build an older commit with
# `git worktree add /tmp/old REV && (cd /tmp/old && cargo build --release)`).
# Runs ROUNDS (default 3) rounds of MODE (authorize or grpc, default
# authorize): a fresh gateway per run (benches/gateway.sh), 64 clients for
# 6 s after a 1 s warm-up, and prints throughput, latency and the gateway's
# CPU time. OLD_BUDGET / NEW_BUDGET set each build's BENCH_BUDGET; the old
# build gets none by default (builds before budget.max_open_reservations
# refuse the key).
set -e
cd "$(dirname "$0")/.."
. benches/gateway.sh
old=$1 new=$2
mode=${MODE:-authorize}
run() {
  local label=$1 work a b out target
  work=$(mktemp -d)
  start_gateway "$work"
  if [ "$mode" = grpc ]; then target=$grpc; else target=$addr; fi
  a=$(awk '{print $14+$15}' /proc/$pid/stat)
  out=$($DGW_BIN/dgw-load --mode "$mode" --addr "$target" --token "$token" --concurrency 64 \
    --duration 6s --warmup 1s 2>&1 | tr '\n' ' ')
  b=$(awk '{print $14+$15}' /proc/$pid/stat)
  echo "$label: $out gateway cpu $(( (b-a)*10 )) ms (warm-up included)"
  kill $pid; wait $pid 2>/dev/null || true
  rm -rf "$work"
}
for _ in $(seq "${ROUNDS:-3}"); do
  DGW_BIN=$old BENCH_BUDGET=${OLD_BUDGET-} run old
  if [ -n "${NEW_BUDGET+set}" ]; then
    DGW_BIN=$new BENCH_BUDGET=$NEW_BUDGET run new
  else
    DGW_BIN=$new run new
  fi
done
