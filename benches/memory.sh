#!/usr/bin/env bash
# Peak memory of dgw serve (VmHWM, from /proc) with state held live: after
# start, with SESSIONS (default 10000) MCP sessions open (dgw-load --open,
# one DCT, never closed), then with RESERVATIONS (default 100000) more
# reservations granted and never settled, each step on the same gateway
# (sled, the default; the echo upstream of dgw-load behind /mcp).
#   benches/memory.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/gateway.sh
cargo build --release --quiet --bin dgw --bin dgw-load
bin=target/release
sessions=${SESSIONS:-10000}
reservations=${RESERVATIONS:-100000}
work=$(mktemp -d)
upstream_pid= pid=
trap 'kill $pid $upstream_pid 2>/dev/null || true; rm -rf "$work"' EXIT
start_echo_upstream "$work"
DGW_LOG=warn start_gateway "$work" "
[mcp]
max_sessions = $((sessions + 100))
max_sessions_per_credential = $((sessions + 100))
$(echo_upstream_toml "url = \"http://$upstream/mcp\"")
"
mem() { awk -v what="$1" '/^VmRSS|^VmHWM/{v[$1]=$2} END{printf "%-44s RSS %6.1f MiB, peak %6.1f MiB\n", what, v["VmRSS:"]/1024, v["VmHWM:"]/1024}' "/proc/$pid/status"; }
sleep 1
mem "started (upstream ready)"
load_gen --mode mcp --addr "$addr" --token "$token" --concurrency 16 --open "$sessions" > /dev/null
mem "with $sessions MCP sessions open"
load_gen --mode authorize --addr "$addr" --token "$token" --concurrency 16 --open "$reservations" > /dev/null
open=$(curl -s "http://$addr/metrics" | awk '/^dgw_reservations_open[ {]/{s+=$2} END{print s+0}')
mem "… and $reservations reservations ($open open)"
