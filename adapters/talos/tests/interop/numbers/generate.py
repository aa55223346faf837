"""Makes the Python halves of the number vectors with the reference code itself.

    python3 generate.py SEED_CAPABILITY_PY CONTRACTS_CANONICAL_PY \
        CONTRACTS_CANONICAL_BEFORE_PY OUT_DIR

SEED_CAPABILITY_PY: talos/core/capability.py of github.com/talosprotocol/talos
(the seed); CONTRACTS_CANONICAL_PY: python/talos_contracts/infrastructure/
canonical.py of github.com/talosprotocol/talos-contracts, and
CONTRACTS_CANONICAL_BEFORE_PY the same file before its 2026-04-19 change.
Needs pydantic and cryptography. See README.md for the commits.
"""

import importlib.util
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


seed = load("seed_capability", sys.argv[1])
contracts = load("contracts_canonical", sys.argv[2])
before = load("contracts_canonical_before", sys.argv[3])
out = Path(sys.argv[4])

# The vectors' key: seed 0, as the reference SDK's test_vectors/meta.json.
key = Ed25519PrivateKey.from_private_bytes(bytes(32))
public_hex = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
issuer = f"did:talos:{public_hex}"

# Numbers as a Python producer holds them: whole-number floats, other
# floats, an int. The seed writes floats with repr (1.0, 1e+16, 1e-05).
NUMBERS = {
    "max_calls": 1.0,
    "limit": 100.0,
    "zero": 0.0,
    "negative": -2.0,
    "big": 1e16,
    "ratio": 0.5,
    "tiny": 1e-05,
    "count": 3,
}

issued = datetime.fromtimestamp(1700000000, tz=timezone.utc)
manager = seed.CapabilityManager(issuer, key, key.public_key())
cap = seed.Capability(
    id="cap_00000000000000000000f10a",
    issuer=issuer,
    subject="did:talos:recipient",
    scope="tool:weather/method:get",
    constraints=dict(NUMBERS),
    issued_at=issued,
    expires_at=issued + timedelta(seconds=3600),
)
cap.signature = manager._sign(cap.canonical_bytes())
key.public_key().verify(cap.signature, cap.canonical_bytes())
(out / "seed_capability.json").write_text(json.dumps(cap.to_dict(), indent=2) + "\n")
(out / "seed_content_canonical.bytes").write_bytes(cap.canonical_bytes())

# The contracts library on the wire capability's content (what a Python
# producer of the v1 format signs with it since 2026-04-19).
wire_content = {
    "v": "1",
    "iss": issuer,
    "sub": "did:talos:recipient",
    "scope": "tools/call",
    "iat": 1700000000.0,
    "exp": 1700003600.0,
    "constraints": {
        "tool": "weather",
        "method": "get",
        **{k: v for k, v in NUMBERS.items() if float(v).is_integer()},
    },
}
(out / "contracts_wire_content_canonical.bytes").write_bytes(
    contracts.canonical_json_bytes(wire_content)
)

# The same content signed with the contracts library as it was before
# 2026-04-19, which wrote the floats as 1.0: what v1 verifiers now refuse.
old = dict(wire_content)
old["sig"] = (
    __import__("base64")
    .urlsafe_b64encode(key.sign(before.canonical_json_bytes(wire_content)))
    .rstrip(b"=")
    .decode()
)
(out / "contracts_before_wire_capability.json").write_text(json.dumps(old, indent=2) + "\n")
(out / "contracts_before_wire_content_canonical.bytes").write_bytes(
    before.canonical_json_bytes(wire_content)
)
