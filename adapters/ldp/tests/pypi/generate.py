"""Writes messages.json: one envelope of each of the 12 LDP message types
as the PyPI package `ldp-protocol` 0.2.0 serializes them
(`model_dump(by_alias=True)`, what its client posts and its delegate
answers), signed by its own `apply_signature` with SECRET. Fixed IDs and
times, so the file is reproducible:

    tests/.venv/bin/python adapters/ldp/tests/pypi/generate.py > adapters/ldp/tests/pypi/messages.json
"""

import json

import ldp_protocol
from ldp_protocol import LdpEnvelope, LdpError, LdpMessageBody, PayloadMode, Provenance, apply_signature

assert ldp_protocol.__version__ == "0.2.0", ldp_protocol.__version__

SECRET = "a-shared-secret-of-32-bytes-0123"
WHEN = "2026-03-15T10:00:00.123456+00:00"
A, B = "ldp:delegate:router", "ldp:delegate:pypi"

bodies = [
    (A, B, LdpMessageBody.hello(A, [PayloadMode.SEMANTIC_FRAME, PayloadMode.TEXT])),
    (B, A, LdpMessageBody.capability_manifest([{"name": "echo", "description": None, "quality": None}])),
    (A, B, LdpMessageBody.session_propose(
        {"preferred_payload_modes": ["semantic_frame", "text"], "ttl_secs": 3600, "trust_domain": "test-domain"})),
    (B, A, LdpMessageBody.session_accept("s-2", PayloadMode.SEMANTIC_FRAME)),
    (B, A, LdpMessageBody.session_reject("Trust domain 'x' not trusted by 'test-domain'")),
    (A, B, LdpMessageBody.task_submit("t-1", "echo", {"text": "hi"})),
    (B, A, LdpMessageBody.task_update("t-1", message="cancelled")),
    (B, A, LdpMessageBody.task_result("t-1", {"echo": {"text": "hi"}}, Provenance.create(
        B, "pypi-0.2.0", confidence=0.9, payload_mode_used=PayloadMode.TEXT, session_id="s-2", timestamp=WHEN))),
    (B, A, LdpMessageBody.task_failed("t-1", LdpError.runtime("TASK_EXECUTION_ERROR", "boom"))),
    (A, B, LdpMessageBody.task_cancel("t-1")),
    (A, B, LdpMessageBody(type="ATTESTATION", claim={"k": "v"}, evidence=[])),
    (A, B, LdpMessageBody.session_close("done")),
]

out = []
for i, (sender, to, body) in enumerate(bodies):
    e = LdpEnvelope(message_id=f"m-{i}", session_id="s-2", to=to, body=body, timestamp=WHEN, **{"from": sender})
    apply_signature(e, SECRET)
    out.append(e.model_dump(by_alias=True, mode="json"))
print(json.dumps(out, indent=1))
