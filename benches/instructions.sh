#!/usr/bin/env bash
# Instructions per call: the one figure this noisy machine repeats to within
# a fraction of a percent, for comparing builds. Runs `dgw serve` under
# callgrind with instrumentation off, warms it up, counts the instructions
# (every thread, user space only; not the kernel's work, nor time spent
# waiting) while dgw-load drives 8 clients for SECS (default 6), and divides
# by the calls the gateway counted meanwhile.
#   benches/instructions.sh              # MCP tools/call through /mcp, on a session
#   MODE=mcp2026 benches/instructions.sh # the same call as MCP 2026-07-28 sends it
#   MODE=authorize benches/instructions.sh   # JSON-RPC, to /rpc
#   MODE=grpc benches/instructions.sh        # gRPC Authorize
#   DGW_BIN=/other/build benches/instructions.sh
#   TRACES=1 benches/instructions.sh     # with OpenTelemetry traces exported
#                                        # (every trace sampled) to a receiver
#                                        # that answers 200 and drops them
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
  mcp | mcp2026) metric=dgw_mcp_gateway_duration_seconds_count ;;
  authorize | grpc) metric=dgw_authorize_duration_seconds_count ;;
  *) echo "MODE is mcp, mcp2026, authorize or grpc" >&2; exit 2 ;;
esac
work=$(mktemp -d)
upstream_pid= pid=
trap 'kill $pid $upstream_pid 2>/dev/null || true; rm -rf "$work"' EXIT
start_echo_upstream "$work"
telemetry=
if [ -n "${TRACES:-}" ]; then
  # An OTLP/HTTP endpoint that reads each export and answers 200: the
  # gateway's side of exporting is measured, not a collector's.
  python3 - "$work/otlp.port" <<'PY' &
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    exports = 0
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        Sink.exports += 1
        open(sys.argv[1] + ".exports", "w").write(str(Sink.exports))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
open(sys.argv[1], "w").write(str(server.server_address[1]))
server.serve_forever()
PY
  upstream_pid="$upstream_pid $!"
  for _ in $(seq 100); do [ -s "$work/otlp.port" ] && break; sleep 0.1; done
  telemetry=$'[telemetry]\notlp_endpoint = "http://127.0.0.1:'"$(cat "$work/otlp.port")"$'"\nsampling_ratio = 1.0'
fi
DGW_LOG=warn DGW_WRAP="valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$work/callgrind.out" \
  start_gateway "$work" "
$telemetry
[mcp]
max_sessions_per_credential = 100000
$(echo_upstream_toml "url = \"http://$upstream/mcp\"")
"
calls() { curl -s "http://$addr/metrics" | awk -v m="$metric" '$1 == m {print $2}'; }
drive() {
  local at=$addr
  [ "$mode" != grpc ] || at=$grpc
  target/release/dgw-load --mode "$mode" --addr "$at" --token "$token" --concurrency 8 \
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
echo "$mode${TRACES:+ (traces on)}: $n calls counted, $((instructions / n)) instructions per call"
if [ -n "${TRACES:-}" ]; then
  exports=$(cat "$work/otlp.port.exports" 2>/dev/null || echo 0)
  echo "the receiver took $exports OTLP exports"
  [ "$exports" -gt 0 ] || { echo "no trace reached the receiver: the run measured nothing" >&2; exit 1; }
fi
[ -z "${KEEP:-}" ] || cp "$work"/callgrind.out.* "$KEEP"/
