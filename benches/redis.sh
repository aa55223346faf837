#!/usr/bin/env bash
# JSON-RPC authorize+settle over loopback on each state backend, in one run:
# sled (the default), Redis with one replica, and three replicas on one
# Redis (the load split over them, one dgw-load each).
#   benches/redis.sh [CONCURRENCY] [DURATION]
# Redis runs as deploy/ ships it: appendonly, appendfsync always
# (REDIS_FSYNC=everysec to compare).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/gateway.sh
concurrency=${1:-64}
duration=${2:-10s}
cargo build --release --quiet --bin dgw --bin dgw-load
work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save "" --dir "$work" \
  --appendonly yes --appendfsync "${REDIS_FSYNC:-always}" > /dev/null &
redis_pid=$!
pids=()
trap 'kill "${pids[@]}" "$redis_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping > /dev/null 2>&1 && break; sleep 0.1; done
redis_toml="[state]
backend = \"redis\"
url = \"redis://127.0.0.1:$port\""

run() {
  load_gen --addr "$1" --token "$token" --concurrency "$2" --duration "$duration" --settle
}

echo "== sled"
mkdir "$work/sled"
start_gateway "$work/sled"
pids+=("$pid")
run "$addr" "$concurrency"
kill "$pid"

echo "== redis, one replica"
mkdir "$work/one"
start_gateway "$work/one" "$redis_toml"
pids+=("$pid")
run "$addr" "$concurrency"
kill "$pid"

echo "== redis, three replicas (one dgw-load each, $((concurrency / 3)) connections)"
mkdir "$work/a"
start_gateway "$work/a" "$redis_toml"
pids+=("$pid")
addrs=("$addr")
for r in b c; do
  mkdir -p "$work/$r/data"
  sed "s|$work/a/data|$work/$r/data|g" "$work/a/gateway.toml" > "$work/$r/gateway.toml"
  target/release/dgw serve --config "$work/$r/gateway.toml" > "$work/$r/out" 2> /dev/null &
  pids+=("$!")
  for _ in $(seq 100); do grep -q listening "$work/$r/out" 2>/dev/null && break; sleep 0.1; done
  addrs+=("$(sed -n 's/^dgw listening http=\([^ ]*\).*/\1/p' "$work/$r/out")")
done
loads=()
for a in "${addrs[@]}"; do
  run "$a" $((concurrency / 3)) > "$work/load.$a.out" &
  loads+=("$!")
done
wait "${loads[@]}"
cat "$work"/load.*.out
