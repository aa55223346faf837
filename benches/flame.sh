#!/usr/bin/env bash
# Flame graphs of the gateway under load, one per path:
#   benches/flame.sh [OUT_DIR]        # default docs/perf
# (KEEP_FOLDED=DIR also keeps the collapsed stacks there, for reading them
# with a script.)
# writes OUT_DIR/mcp.svg (MCP `tools/call` through /mcp to the dgw-load echo
# upstream) and OUT_DIR/authorize.svg (JSON-RPC `delegateos/authorize`),
# each from `perf record` of the gateway's process alone (all its threads)
# while dgw-load drives it with 64 clients, after a 2 s warm-up. Needs
# `perf` (Debian: linux-perf) and inferno (`cargo install inferno`).
# PERF_SECONDS (default 5) sets how long each profile records. Stacks are
# walked with DWARF unwind info unless the binary keeps frame pointers:
# DGW_BIN=DIR with a `dgw` built with RUSTFLAGS="-C force-frame-pointers=yes"
# and PERF_CALL_GRAPH=fp give complete stacks at a fraction of the cost
# (async Rust stacks are often deeper than DWARF's copied 16 KiB).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/gateway.sh
out=${1:-docs/perf}
seconds=${PERF_SECONDS:-5}
mkdir -p "$out"
cargo build --release --quiet --bin dgw-load
[ -n "${DGW_BIN:-}" ] || cargo build --release --quiet --bin dgw
bin=target/release
work=$(mktemp -d)
upstream_pid=
pid=
trap 'kill $pid $upstream_pid 2>/dev/null || true; rm -rf "$work"' EXIT
start_echo_upstream "$work"
start_gateway "$work" "
$(echo_upstream_toml "url = \"http://$upstream/mcp\"")
"
for mode in mcp authorize; do
  load_gen --mode "$mode" --addr "$addr" --token "$token" --concurrency 64 \
    --duration "$((seconds + 3))s" --warmup 1s > "$work/load-$mode.out" &
  load=$!
  sleep 2
  perf record -q -F 499 -g --call-graph "${PERF_CALL_GRAPH:-dwarf,16384}" -p "$pid" -o "$work/perf.data" -- sleep "$seconds" 2>/dev/null
  wait $load
  cat "$work/load-$mode.out"
  perf script -i "$work/perf.data" 2>/dev/null | inferno-collapse-perf > "$work/$mode.folded"
  inferno-flamegraph --minwidth 0.5 --title "dgw: $mode under 64 clients ($(git rev-parse --short HEAD))" \
    < "$work/$mode.folded" > "$out/$mode.svg"
  echo "wrote $out/$mode.svg"
  [ -z "${KEEP_FOLDED:-}" ] || cp "$work/$mode.folded" "$KEEP_FOLDED/dgw-$mode.folded"
done
