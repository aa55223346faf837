#!/usr/bin/env bash
# MCP `tools/call` side by side: the same echo upstream (dgw-load
# --serve-upstream, Streamable HTTP, one JSON body per answer) called
#   (a) directly,
#   (b) through dgw with full enforcement (a DCT verified, the capability
#       matched, 1 microcent reserved and settled, the audit log written),
#   (b') through dgw as in (b), the call sent as MCP 2026-07-28 sends it
#       (dgw-2026: no session, the revision's `_meta` and headers on each
#       request; dgw still speaks to the echo server on its session),
#   (s) through dgw as in (b), to the same echo server over stdio (dgw-load
#       --serve-stdio, a child process of that gateway): direct has no stdio
#       counterpart, so its ratio is to direct HTTP,
#   (p) through the least an HTTP/1.1 proxy on dgw's stack can do (dgw-load
#       --serve-proxy: forwards bytes, parses nothing): the floor of a hop,
#   (c) through agentgateway, when AGENTGATEWAY names a built binary
#       (../shared/notes/agentgateway.md; no authorization configured),
# by the same client (dgw-load: one MCP session per connection, a request
# per connection at a time), at the same points, one after the other in one
# run, and prints one table (benches/compare/table.py): throughput and
# p50/p99 closed loop at each of CLOSED connections, then open loop at each
# of RATES requests/s offered by 64 connections (latency counted from when
# each request was due, so a stall counts against every request it held
# up), the server-side CPU per call, and each target's ratio to direct.
#   benches/compare/run.sh
#   AGENTGATEWAY=/path/to/agentgateway benches/compare/run.sh
# Then the peak memory of each server, and of a fresh dgw holding 10,000 MCP
# sessions and 100,000 live reservations (benches/memory.sh).
# DURATION (default 5s, after a 1 s warm-up), CLOSED (default "8 64"),
# RATES (default "2000 5000 10000"; either may be empty), ROUNDS (default 1: every target at a
# point, then the next point; more rounds alternate again), DGW_BIN
# (default target/release), DGW_TOML (appended to dgw's configuration, such
# as $'[audit]\nenabled = false' to see what the audit log costs). Traffic
# stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/../.."
. benches/gateway.sh
cargo build --release --quiet --bin dgw --bin dgw-load
bin=target/release
duration=${DURATION:-5s}
work=$(mktemp -d)
upstream_pid= pid= agw_pid= proxy_pid=
trap 'kill $pid $upstream_pid $agw_pid $proxy_pid 2>/dev/null || true; rm -rf "$work"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }

start_echo_upstream "$work"

# gateway_to WORK TRANSPORT: a dgw for the echo server at TRANSPORT (its
# `url` or `command` line). Every run opens fresh sessions with the same
# DCT: allow them all.
gateway_to() {
  DGW_LOG=${DGW_LOG:-warn} start_gateway "$1" "
[mcp]
max_sessions = 1000000
max_sessions_per_credential = 1000000
$(echo_upstream_toml "$2")
${DGW_TOML:-}"
}
gateway_to "$work" "url = \"http://$upstream/mcp\""
dgw_pid=$pid dgw_token=$token dgw_addr=$addr
mkdir "$work/stdio"
gateway_to "$work/stdio" "command = [\"$PWD/$bin/dgw-load\", \"--serve-stdio\"]"
stdio_pid=$pid stdio_token=$token stdio_addr=$addr
stdio_child=$(pgrep -P "$stdio_pid" -f -- --serve-stdio)
pid="$dgw_pid $stdio_pid"
$bin/dgw-load --serve-proxy 127.0.0.1:0 --addr "$upstream" > "$work/proxy.out" &
proxy_pid=$!
for _ in $(seq 100); do grep -q listening "$work/proxy.out" 2>/dev/null && break; sleep 0.1; done
proxy=$(sed -n 's/^dgw-load proxy listening addr=//p' "$work/proxy.out")
targets="direct proxy dgw dgw-2026 dgw-stdio"
if [ -n "${AGENTGATEWAY:-}" ]; then
  agw_port=$(free_port)
  cat > "$work/agw.yaml" <<YAML
config:
  enableIpv6: false
  adminAddr: 127.0.0.1:$(free_port)
  statsAddr: 127.0.0.1:$(free_port)
  readinessAddr: 127.0.0.1:$(free_port)
binds:
- port: $agw_port
  listeners:
  - routes:
    - backends:
      - mcp:
          targets:
          - name: echo
            mcp:
              host: ${upstream%:*}
              port: ${upstream##*:}
              path: /mcp
YAML
  RUST_LOG=warn "$AGENTGATEWAY" -f "$work/agw.yaml" > "$work/agw.out" 2>&1 &
  agw_pid=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$agw_port/" 2>/dev/null && break
    sleep 0.1
  done
  targets="$targets agentgateway"
fi

# run TARGET POINT: one load run; appends a row to $work/rows.
run() {
  local target=$1 point=$2 mode=mcp addr_for=$dgw_addr server=$dgw_pid extra
  local token=$dgw_token upstream_of=$upstream_pid
  case $target in
    dgw-2026) mode=mcp2026 ;;
    dgw-stdio) addr_for=$stdio_addr server=$stdio_pid token=$stdio_token upstream_of=$stdio_child ;;
    direct) mode=direct addr_for=$upstream server= ;;
    proxy) mode=direct addr_for=$proxy server=$proxy_pid ;;
    agentgateway) mode=direct addr_for=127.0.0.1:$agw_port server=$agw_pid ;;
  esac
  case $point in
    closed:*) extra="--concurrency ${point#closed:}" ;;
    open:*) extra="--concurrency 64 --rate ${point#open:}" ;;
  esac
  local s0 u0 s1 u1 out
  s0=${server:+$(cpu_ticks "$server")}
  u0=$(cpu_ticks "$upstream_of")
  # shellcheck disable=SC2086
  out=$(/usr/bin/time -f "client_cpu %U %S" $bin/dgw-load --mode $mode --addr "$addr_for" \
    --token "$token" --duration "$duration" --warmup 1s $extra 2>&1 | tr '\n' ' ')
  s1=${server:+$(cpu_ticks "$server")}
  u1=$(cpu_ticks "$upstream_of")
  echo "$target|$point|$(( ${s1:-0} - ${s0:-0} ))|$((u1 - u0))|$out" >> "$work/rows"
}

for _ in $(seq "${ROUNDS:-1}"); do
  for n in ${CLOSED-8 64}; do for t in $targets; do run "$t" "closed:$n"; done; done
  for r in ${RATES-2000 5000 10000}; do for t in $targets; do run "$t" "open:$r"; done; done
done
python3 benches/compare/table.py "$duration" "$(getconf CLK_TCK)" < "$work/rows"

# Memory: each server's peak after the runs above, then dgw's with state
# held live (benches/memory.sh, a fresh gateway). MEMORY=0 skips the latter.
peak() { awk '/^VmHWM/{printf "%.1f", $2/1024}' "/proc/$1/status"; }
echo
echo "| memory | target | peak RSS (VmHWM), MiB |"
echo "| --- | --- | ---: |"
echo "| after the runs above | proxy | $(peak "$proxy_pid") |"
echo "| after the runs above | dgw | $(peak "$dgw_pid") |"
[ -z "$agw_pid" ] || echo "| after the runs above | agentgateway | $(peak "$agw_pid") |"
if [ "${MEMORY:-1}" != 0 ]; then
  benches/memory.sh | sed -n 's/^\(.*[^ ]\) *RSS .*peak *\([0-9.]*\) MiB$/| \1 | dgw (fresh) | \2 |/p'
fi
