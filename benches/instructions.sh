#!/usr/bin/env bash
# Instructions per call: the one figure this noisy machine repeats to within
# a fraction of a percent, for comparing builds. Runs `dgw serve` under
# callgrind with instrumentation off, warms it up, counts the instructions
# (every thread, user space only; not the kernel's work, nor time spent
# waiting) while dgw-load drives 8 clients for SECS (default 6), and divides
# by the calls the gateway counted meanwhile.
#   benches/instructions.sh              # MCP tools/call through /mcp
#   MODE=authorize benches/instructions.sh
#   DGW_BIN=/other/build benches/instructions.sh
# KEEP=DIR keeps the callgrind profile there (callgrind_annotate reads it).
# Needs valgrind. Under it the gateway runs some 50x slower: only the
# instruction counts mean anything, never the throughput.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/gateway.sh
cargo build --release --quiet --bin dgw-load
[ -n "${DGW_BIN:-}" ] || cargo build --release --quiet --bin dgw
mode=${MODE:-mcp}
case $mode in
  mcp) metric=dgw_mcp_gateway_duration_seconds_count ;;
  authorize) metric=dgw_authorize_duration_seconds_count ;;
  *) echo "MODE is mcp or authorize" >&2; exit 2 ;;
esac
work=$(mktemp -d)
upstream_pid= pid=
trap 'kill $pid $upstream_pid 2>/dev/null || true; rm -rf "$work"' EXIT
start_echo_upstream "$work"
DGW_LOG=warn DGW_WRAP="valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$work/callgrind.out" \
  start_gateway "$work" "
[mcp]
max_sessions_per_credential = 100000
$(echo_upstream_toml "url = \"http://$upstream/mcp\"")
"
calls() { curl -s "http://$addr/metrics" | awk -v m="$metric" '$1 == m {print $2}'; }
drive() {
  target/release/dgw-load --mode "$mode" --addr "$addr" --token "$token" --concurrency 8 \
    --duration "$1" --warmup 0s > /dev/null
}
drive 3s
before=$(calls)
callgrind_control -i on "$pid" > /dev/null 2>&1
drive "${SECS:-6}s"
callgrind_control -i off "$pid" > /dev/null 2>&1
after=$(calls)
callgrind_control -d "$pid" > /dev/null 2>&1
sleep 1
n=$((after - before))
instructions=$(cat "$work"/callgrind.out.* | awk '/^(summary|totals):/ {s += $2} END {print s}')
echo "$mode: $n calls counted, $((instructions / n)) instructions per call"
[ -z "${KEEP:-}" ] || cp "$work"/callgrind.out.* "$KEEP"/
