#!/usr/bin/env bash
# Drives dgw serve over loopback with dgw-load and prints its figures.
#   benches/load.sh [CONCURRENCY] [DURATION] [--settle] [NAMESPACE]
# (NAMESPACE other than docs makes every request a capability denial: the
# pipeline without the ledger.)
#   MODE=mcp benches/load.sh [CONCURRENCY] [DURATION]
# runs a fast loopback MCP echo server (dgw-load --serve-upstream), calls its
# `echo` tool directly, then through dgw's /mcp, and prints both: the
# difference is the latency dgw adds.
#   MODE=grpc benches/load.sh [CONCURRENCY] [DURATION] [--settle]
# drives the gRPC front's Authorize instead of JSON-RPC's.
# LOAD_ARGS adds dgw-load options, such as LOAD_ARGS="--rate 10000" (open
# loop) or, for gRPC, LOAD_ARGS="--connections 4"; DGW_WORKERS=1 runs the
# gateway with one worker thread ([server] workers).
# Builds release binaries, starts a gateway with a fresh data dir and a bench
# tenant on a free port, issues a token with a large budget, runs the load,
# and stops the gateway. Traffic stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/gateway.sh
concurrency=${1:-64}
duration=${2:-10s}
settle=${3:-}
namespace=${4:-docs}
cargo build --release --quiet --bin dgw --bin dgw-load
bin=target/release
work=$(mktemp -d)
upstream_pid=
trap 'kill $pid $upstream_pid 2>/dev/null || true; rm -rf "$work"' EXIT
mode=${MODE:-authorize}
upstream_toml=
if [ "$mode" = mcp ]; then
  start_echo_upstream "$work"
  upstream_toml="
$(echo_upstream_toml "url = \"http://$upstream/mcp\"")
"
fi
start_gateway "$work" "$upstream_toml"
if [ "$mode" = mcp ]; then
  load_gen --mode direct --addr "$upstream" --concurrency "$concurrency" --duration "$duration" ${LOAD_ARGS:-}
  load_gen --mode mcp --addr "$addr" --token "$token" --concurrency "$concurrency" --duration "$duration" ${LOAD_ARGS:-}
  curl -s "http://$addr/metrics" | grep -E "^dgw_(mcp_gateway_duration|mcp_upstream_duration|budget_journal_sync_duration|authorize_duration)_seconds_(sum|count)"
elif [ "$mode" = grpc ]; then
  load_gen --mode grpc --addr "$grpc" --token "$token" --concurrency "$concurrency" --duration "$duration" --namespace "$namespace" ${settle:+--settle} ${LOAD_ARGS:-}
else
  load_gen --addr "$addr" --token "$token" --concurrency "$concurrency" --duration "$duration" --namespace "$namespace" ${settle:+--settle} ${LOAD_ARGS:-}
fi
