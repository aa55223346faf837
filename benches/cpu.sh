#!/usr/bin/env bash
# Gateway CPU per request, by front: starts a fresh gateway (JSON-RPC and
# gRPC), runs dgw-load in each mode of $MODES (default: authorize grpc)
# for 8 s at 64 clients, and prints the gateway's CPU time (from
# /proc/PID/stat) and the load generator's (/usr/bin/time) beside the
# throughput. Use one mode per run for clean figures: a run leaves
# reservations behind that the next one pays for.
#   MODES=grpc benches/cpu.sh
# LOAD_ARGS adds dgw-load options, such as LOAD_ARGS="--connections 4";
# DGW_CPUS=1 LOAD_CPUS=0 pins the gateway and the load generator to a core
# each (benches/gateway.sh).
set -e
cd "$(dirname "$0")/.."
. benches/gateway.sh
MODES=${MODES:-authorize grpc}
cargo build --release --quiet --bin dgw --bin dgw-load
bin=target/release
work=$(mktemp -d)
start_gateway "$work"

for mode in $MODES; do
  a=$(awk '{print $14+$15}' /proc/$pid/stat)
  if [ $mode = grpc ]; then target=$grpc; else target=$addr; fi
  /usr/bin/time -f "load-gen cpu %U+%S s" ${LOAD_CPUS:+taskset -c $LOAD_CPUS} $bin/dgw-load --mode $mode --addr $target --token "$token" --concurrency 64 --duration ${DURATION:-8s} --warmup 1s ${LOAD_ARGS:-} 2>&1
  b=$(awk '{print $14+$15}' /proc/$pid/stat)
  echo "dgw cpu: $(( (b-a) ))0 ms over the run (warm-up included)"
done
kill $pid; wait $pid 2>/dev/null || true
rm -rf "$work"
