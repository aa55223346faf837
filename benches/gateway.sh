# Sourced by benches/load.sh and benches/cpu.sh: the gateway they measure.
#   start_gateway WORK [EXTRA_TOML]
# starts the release `dgw serve` (from DGW_BIN, default target/release) with
# its data in WORK, a bench tenant and
# free loopback ports (EXTRA_TOML appended to its config), logging at
# DGW_LOG (default info) to DGW_ERR (default /dev/null), with DGW_WORKERS
# worker threads if set (else one per core), on the CPUs of DGW_CPUS if set
# (a taskset list; see `load_gen` for the load generator's); waits until it
# listens and sets pid, addr, grpc and token (a DCT for docs:read:/** with a
# budget no run exhausts).
start_gateway() {
  local work=$1 extra=${2:-} bin=${DGW_BIN:-target/release} root budget
  # Runs without --settle leave every reservation open: let them, so the
  # figures stay comparable with runs before the cap existed. BENCH_BUDGET=""
  # leaves the line out, for builds older than the setting.
  if [ -n "${BENCH_BUDGET+set}" ]; then
    budget=$BENCH_BUDGET
  else
    budget=$'[budget]\nmax_open_reservations = 1000000000'
  fi
  root=$($bin/dgw keygen --out "$work/root.key" 2>/dev/null)
  cat > "$work/gateway.toml" <<TOML
data_dir = "$work/data"
key_file = "$work/data/gateway.key"
[server]
http = "127.0.0.1:0"
grpc = "127.0.0.1:0"
${DGW_WORKERS:+workers = $DGW_WORKERS}
[[tenants]]
name = "bench"
root = "$root"
$budget
$extra
TOML
  # shellcheck disable=SC2086
  RUST_LOG=${DGW_LOG:-info} ${DGW_CPUS:+taskset -c $DGW_CPUS} ${DGW_WRAP:-} $bin/dgw serve --config "$work/gateway.toml" > "$work/out" 2> "${DGW_ERR:-/dev/null}" &
  pid=$!
  for _ in $(seq 300); do grep -q listening "$work/out" 2>/dev/null && break; sleep 0.1; done
  addr=$(sed -n 's/^dgw listening http=\([^ ]*\).*/\1/p' "$work/out")
  grpc=$(sed -n 's/.* grpc=\([^ ]*\).*/\1/p' "$work/out")
  token=$($bin/dgw token issue --key "$work/root.key" --to "$root" --cap 'docs:read:/**' \
    --contract ct_000000000001 --delegation del_000000000001 --budget 9000000000000000 \
    --max-depth 1 --ttl 1h 2>/dev/null)
}

# load_gen ARGS...: runs dgw-load on the CPUs of LOAD_CPUS if set. With
# DGW_CPUS=1 LOAD_CPUS=0 the gateway and its load generator no longer take
# turns on both cores, so throughput measures the gateway, not the sum of
# both programs' costs.
load_gen() {
  ${LOAD_CPUS:+taskset -c $LOAD_CPUS} target/release/dgw-load "$@"
}

# start_echo_upstream WORK: runs dgw-load's MCP echo server (Streamable
# HTTP) on a free loopback port; sets upstream (its address) and
# upstream_pid.
start_echo_upstream() {
  target/release/dgw-load --serve-upstream 127.0.0.1:0 > "$1/upstream.out" &
  upstream_pid=$!
  for _ in $(seq 100); do grep -q listening "$1/upstream.out" 2>/dev/null && break; sleep 0.1; done
  upstream=$(sed -n 's/^dgw-load upstream listening http=//p' "$1/upstream.out")
}

# echo_upstream_toml TRANSPORT: the gateway's [[upstreams]] entry for the
# echo server, TRANSPORT being its `url = ...` or `command = [...]` line; its
# tool `echo` enforced as docs:read on /text at 1 microcent a call.
echo_upstream_toml() {
  cat <<TOML
[[upstreams]]
name = "echo"
$1
[[upstreams.tools]]
name = "echo"
capability = "docs:read"
resource = "/text"
cost_microcents = 1
TOML
}
