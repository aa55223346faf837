"""A router made of the PyPI `ldp-protocol` 0.2.0 package (`LdpRouter`,
`LdpClient`), talking to dgw, for tests/ldp_pypi.rs.

Usage: pypi_router.py SCENARIO, with a JSON object on stdin:
  url           the delegate's endpoint through dgw (`http://…/ldp/NAME`)
  secret        the shared secret
  dct           the router's DCT (sent as `Authorization: DCT …`)
  router_id     the router's delegate ID
  trust_domain  the router's trust domain
  skill         the skill to ask

Scenarios: `session` (a whole session, with a fallback), `denials` (each
refusal of the LDP tests, sent from this package), `concurrent` (50 tasks
at once in one session). Prints one JSON object: what happened, step by
step, and every HTTP exchange with dgw (each answer's signature checked
with the package's own `verify_envelope`, since its client never checks).

The package has no way to send a DCT, a bad signature or an old timestamp:
the DCT goes into its httpx client's headers; bad messages are built with
its own types, signed with its own `apply_signature`, then changed, and
sent by a client without a secret (which sends what it is given).
"""

import asyncio
import json
import sys
from datetime import datetime, timedelta, timezone
from uuid import uuid4

import httpx

import ldp_protocol
from ldp_protocol import (
    LdpClient,
    LdpEnvelope,
    LdpMessageBody,
    LdpRouter,
    PayloadMode,
    RoutingStrategy,
    SessionConfig,
    TrustDomain,
    apply_signature,
    verify_envelope,
)

assert ldp_protocol.__version__ == "0.2.0", ldp_protocol.__version__

args = json.load(sys.stdin)
URL, SECRET, ROUTER = args["url"], args["secret"], args["router_id"]
SKILL = args.get("skill", "echo")
exchanges = []


async def record(response: httpx.Response) -> None:
    """Keeps every exchange with dgw, the answer's signature checked."""
    await response.aread()
    request = response.request
    entry = {
        "method": request.method,
        "path": request.url.path,
        "status": response.status_code,
    }
    if request.content:
        entry["request"] = json.loads(request.content)
    try:
        entry["response"] = response.json()
    except ValueError:
        entry["response"] = response.text
    if request.url.path.endswith("/ldp/messages") and response.status_code == 200:
        answer = LdpEnvelope.model_validate(response.json())
        entry["answer_type"] = answer.body.type
        entry["answer_verified"] = bool(answer.signature) and verify_envelope(
            answer, SECRET, answer.signature
        )
    exchanges.append(entry)


def client(
    *, secret=SECRET, trust_domain=None, modes=None, dct=True
) -> LdpClient:
    """The package's client; with `secret=None` it sends what it is given."""
    config = SessionConfig(preferred_payload_modes=modes) if modes else None
    c = LdpClient(
        delegate_id=ROUTER,
        config=config,
        trust_domain=TrustDomain(name=trust_domain or args["trust_domain"]),
        signing_secret=secret,
    )
    if dct:
        c._http.headers["authorization"] = f"DCT {args['dct']}"
    c._http.event_hooks = {"request": [], "response": [record]}
    return c


def refusal(e: Exception) -> dict:
    """What dgw answered to a refused message."""
    if isinstance(e, httpx.HTTPStatusError):
        try:
            body = e.response.json()
        except ValueError:
            body = {"error": {"type": None, "message": e.response.text}}
        return {"status": e.response.status_code, **body["error"]}
    return {"status": None, "type": type(e).__name__, "message": str(e)}


async def attempt(coro) -> dict:
    try:
        answer = await coro
    except Exception as e:  # noqa: BLE001 - reported, judged by the test
        return refusal(e)
    if isinstance(answer, LdpEnvelope):
        return {"status": 200, "answer": answer.body.type}
    return {"status": 200, "answer": answer}


def message(session_id, to, body, mode=PayloadMode.TEXT) -> LdpEnvelope:
    return LdpEnvelope.create(session_id, ROUTER, to, body, mode)


def submit(session_id, to, task_id, mode=PayloadMode.TEXT) -> LdpEnvelope:
    body = LdpMessageBody.task_submit(task_id, SKILL, {"text": task_id})
    return message(session_id, to, body, mode)


async def session() -> dict:
    """LdpRouter discovers the delegate through dgw and routes a task (the
    package's whole handshake), then the session falls back a mode, is
    refused going back up, and closes."""
    c = client()
    out = {}
    async with LdpRouter(client=c, delegate_id=ROUTER) as router:
        found = await router.discover_delegates([URL])
        out["discovered"] = [d.model_dump() for d in found]
        out["first"] = await router.route_and_submit(
            skill=SKILL, input_data={"text": "first"}, strategy=RoutingStrategy.QUALITY
        )
        s = c._sessions[URL]
        out["session_id"] = s.session_id
        out["negotiated"] = s.payload.mode.value
        # Fall back one mode: the package's session just changes its mode.
        s.payload.mode = PayloadMode.TEXT
        out["fallback"] = await c.submit_task(
            URL, skill=SKILL, input_data={"text": "fallback"}, session=s
        )
        s.payload.mode = PayloadMode(out["negotiated"])
        out["back_up"] = await attempt(
            c.submit_task(URL, skill=SKILL, input_data={"text": "up"}, session=s)
        )
        close = message(
            s.session_id, s.remote_delegate_id, LdpMessageBody.session_close("done")
        )
        out["close"] = await attempt(c.send_message(URL, close))
    await c.close()
    return out


def signed(e: LdpEnvelope, secret=SECRET) -> LdpEnvelope:
    apply_signature(e, secret)
    return e


async def denials() -> dict:
    """Every refusal of tests/ldp.rs, sent by this package."""
    c = client(modes=[PayloadMode.TEXT])
    raw = client(secret=None)
    card = await c.discover(URL)
    to = card.delegate_id
    out = {}
    out["task_before_session"] = await attempt(
        c.send_message(URL, submit(str(uuid4()), to, "t-0"))
    )
    s = await c.establish_session(URL)
    sid = s.session_id
    out["session_id"] = sid
    out["negotiated"] = s.payload.mode.value

    m = submit(sid, to, "t-1")
    out["first_send"] = await attempt(c.send_message(URL, m))
    out["replay"] = await attempt(c.send_message(URL, m))

    e = signed(submit(sid, to, "t-2"))
    e.signature = e.signature[:-1] + ("0" if e.signature[-1] != "0" else "1")
    out["tampered_signature"] = await attempt(raw.send_message(URL, e))

    e = signed(submit(sid, to, "t-3"))
    e.body.task_id = "t-3-changed"
    out["tampered_field"] = await attempt(raw.send_message(URL, e))

    e = signed(submit(sid, to, "t-4"), "not-the-shared-secret-at-all-000")
    out["other_secret"] = await attempt(raw.send_message(URL, e))

    hello = message("", to, LdpMessageBody.hello(ROUTER, [PayloadMode.TEXT]))
    out["unsigned_hello"] = await attempt(raw.send_message(URL, hello))

    def at(when: str) -> LdpEnvelope:
        e = submit(sid, to, "t-time")
        e.timestamp = when
        return signed(e)

    now = datetime.now(timezone.utc)
    out["stale_timestamp"] = await attempt(
        raw.send_message(URL, at((now - timedelta(hours=1)).isoformat()))
    )
    out["future_timestamp"] = await attempt(
        raw.send_message(URL, at((now + timedelta(hours=1)).isoformat()))
    )
    out["unparseable_timestamp"] = await attempt(raw.send_message(URL, at("yesterday")))

    e = signed(submit(sid, "ldp:delegate:other", "t-5"))
    out["wrong_recipient"] = await attempt(raw.send_message(URL, e))

    foreign = client(trust_domain="elsewhere")
    out["foreign_trust_domain"] = await attempt(foreign.establish_session(URL))
    await foreign.close()

    out["mode_outside_chain"] = await attempt(
        c.send_message(URL, submit(sid, to, "t-6", PayloadMode.SEMANTIC_FRAME))
    )

    forged = LdpMessageBody(
        type="ATTESTATION",
        claim={"type": "delegateos.attestation"},
        evidence={"id": "att_000000000001"},
    )
    out["forged_attestation"] = await attempt(
        c.send_message(URL, message(sid, to, forged))
    )

    out["no_provenance"] = await attempt(
        c.submit_task(URL, skill=SKILL, input_data={"no_provenance": True}, session=s)
    )

    # A member of another message type carrying a value (a HELLO with a
    # task_id): the package would send it, dgw refuses it.
    odd = LdpMessageBody(
        type="HELLO", delegate_id=ROUTER, supported_modes=[PayloadMode.TEXT], task_id="x"
    )
    out["foreign_member_with_value"] = await attempt(
        c.send_message(URL, message("", to, odd))
    )
    for x in (c, raw):
        await x.close()
    return out


async def concurrent() -> dict:
    """50 tasks of one session at once."""
    c = client()
    s = await c.establish_session(URL)
    outcomes = await asyncio.gather(
        *(
            attempt(c.submit_task(URL, skill=SKILL, input_data={"i": i}, session=s))
            for i in range(50)
        )
    )
    await c.close()
    return {"session_id": s.session_id, "outcomes": outcomes}


scenario = {"session": session, "denials": denials, "concurrent": concurrent}[sys.argv[1]]
try:
    result = asyncio.run(scenario())
except Exception:
    # dgw's last answer says why.
    print(json.dumps(exchanges[-1:]), file=sys.stderr)
    raise
result["exchanges"] = exchanges
print(json.dumps(result))
