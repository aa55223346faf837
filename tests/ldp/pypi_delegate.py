"""The PyPI `ldp-protocol` 0.2.0 package's own delegate server, for
tests/ldp_pypi.rs: an `LdpDelegate` (an echo skill) run by the package's
`run()` (its Starlette routes under uvicorn), on a port the OS chose.

Usage: pypi_delegate.py DELEGATE_ID SECRET TRUST_DOMAIN LOG_FILE

Prints one line, `{"port": N}`, once its socket listens. Appends to LOG_FILE
one JSON line per message it receives: the raw envelope and whether the
package's own `verify_envelope` accepts its signature, so the test can check
what dgw sends is what this peer takes.

Hostile behaviours, for the tests: a task whose input is
`{"no_provenance": true}` is answered without provenance; with
PYPI_DELEGATE_SESSION_ID set, every session is accepted under that ID.
"""

import json
import os
import socket
import sys

import uvicorn

import ldp_protocol
from ldp_protocol import LdpDelegate, TrustDomain, verify_envelope
from ldp_protocol.types.capability import LdpCapability, QualityMetrics

assert ldp_protocol.__version__ == "0.2.0", ldp_protocol.__version__

delegate_id, secret, trust_domain, log_file = sys.argv[1:5]


class Echo(LdpDelegate):
    async def handle_task(self, skill, input_data, task_id):
        return {"echo": input_data, "skill": skill}, 0.9

    async def _handle_task_submit(self, envelope):
        answer = await super()._handle_task_submit(envelope)
        if isinstance(envelope.body.input, dict) and envelope.body.input.get("no_provenance"):
            answer.body.provenance = None
        return answer

    def _handle_session_propose(self, envelope):
        answer = super()._handle_session_propose(envelope)
        fixed = os.environ.get("PYPI_DELEGATE_SESSION_ID")
        if fixed and answer.body.type == "SESSION_ACCEPT":
            answer.session_id = answer.body.session_id = fixed
        return answer

    async def handle_message(self, envelope):
        with open(log_file, "a") as log:
            log.write(
                json.dumps(
                    {
                        "envelope": envelope.model_dump(by_alias=True),
                        "verified": bool(envelope.signature)
                        and verify_envelope(envelope, secret, envelope.signature),
                    }
                )
                + "\n"
            )
        return await super().handle_message(envelope)


delegate = Echo(
    delegate_id=delegate_id,
    name="PyPI echo",
    model_family="test",
    model_version="pypi-0.2.0",
    capabilities=[
        LdpCapability(
            name="echo",
            description="Echoes its input",
            quality=QualityMetrics(quality_score=0.9, cost_per_call_usd=0.001),
        )
    ],
    trust_domain=TrustDomain(name=trust_domain),
    signing_secret=secret,
)

# The package's run() binds the port it is given; bind one first (port 0,
# the OS picks) and have uvicorn serve that socket, so the port is known
# and nothing races for it.
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.bind(("127.0.0.1", 0))
sock.listen(128)
port = sock.getsockname()[1]


def serve_on_our_socket(app, host, port, **_):
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    server.run(sockets=[sock])


uvicorn.run = serve_on_our_socket
print(json.dumps({"port": port}), flush=True)
# run() prints its banner: to stderr, so stdout stays one line.
sys.stdout = sys.stderr
delegate.run(host="127.0.0.1", port=port)
