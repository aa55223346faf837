#!/usr/bin/env bash
# The floor each front stands on: dgw-load --serve-floor, a server that does
# no work (fixed answers from memory, the size of the gateway's), driven by
# the same clients as the gateway in each mode of $MODES, with a fresh server
# per run. Prints throughput and latency, then the CPU per request of the
# server and of the load generator. Whatever the gateway cannot beat here,
# the transport, the client and this machine set; not the gateway.
#   benches/floor.sh                     # closed loop, 64 clients, 5 s each
#   LOAD_ARGS="--rate 20000" benches/floor.sh
#   ROUNDS=3 MODES="authorize grpc" benches/floor.sh
# A mode may carry dgw-load options, as in the default:
#   MODES='authorize grpc grpc:--connections=1'
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin dgw-load
bin=target/release
work=$(mktemp -d)
server=
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
# A token-sized string: the floor server does not read it.
token=$(head -c 926 /dev/zero | tr '\0' x)
for _ in $(seq "${ROUNDS:-1}"); do
  for spec in ${MODES:-authorize grpc grpc:--connections=1}; do
    mode=${spec%%:*}
    extra=
    [ "$spec" = "$mode" ] || extra=${spec#*:}
    extra=${extra//=/ }
    $bin/dgw-load --serve-floor 127.0.0.1:0 > "$work/floor.out" &
    server=$!
    for _ in $(seq 100); do grep -q listening "$work/floor.out" 2>/dev/null && break; sleep 0.05; done
    addr=$(sed -n 's/^dgw-load floor listening addr=//p' "$work/floor.out")
    # shellcheck disable=SC2086
    /usr/bin/time -o "$work/time" -f "%U %S" $bin/dgw-load --mode "$mode" --addr "$addr" \
      --token "$token" --concurrency 64 --duration "${DURATION:-5s}" --warmup 1s $extra ${LOAD_ARGS:-} \
      > "$work/load.out"
    server_cpu=$(awk '{print ($14+$15)/100}' /proc/$server/stat)
    kill $server
    wait $server 2>/dev/null || true
    server=
    cat "$work/load.out"
    # Everything sent, warm-up included: the answers counted cover only the
    # measured part, so scale them by (warm-up + duration) / duration.
    python3 - "$work/load.out" "$server_cpu" "$(cat "$work/time")" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
answers = int(re.search(r": (\d+) answers", text).group(1))
secs = float(re.search(r"(\d+(?:\.\d+)?)s: \d+ answers", text).group(1))
sent = answers * (secs + 1) / secs
server = float(sys.argv[2])
load = sum(map(float, sys.argv[3].split()))
print(f"  CPU per request: server {server / sent * 1e6:.1f} µs, load generator {load / sent * 1e6:.1f} µs")
PY
  done
done
