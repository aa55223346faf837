#!/usr/bin/env bash
# Installs what the tests drive besides the Rust code, pinned:
#  - Node packages (tests/package-lock.json): the TypeScript DelegateOS peer's
#    libraries, the reference MCP filesystem server and the MCP TypeScript SDK;
#  - a Python virtualenv in tests/.venv (tests/requirements.txt): grpcio, to
#    prove the gRPC API usable from another ecosystem.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --loglevel=error
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
