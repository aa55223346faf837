"""A gRPC client from another ecosystem: Python grpcio, with stubs generated
from proto/ at test time (the Rust test runs grpc_tools.protoc first).
Authorizes, settles, reads the budget, and reads a denial's rich details
(google.rpc.Status with an ErrorInfo); prints one JSON object.

    python python_client.py STUBS_DIR ADDR TOKEN
"""
import json
import sys

sys.path.insert(0, sys.argv[1])
addr, token = sys.argv[2], sys.argv[3]

import grpc  # noqa: E402
from google.rpc import error_details_pb2  # noqa: E402
from grpc_status import rpc_status  # noqa: E402

from delegate_gateway.v1 import gateway_pb2 as pb  # noqa: E402
from delegate_gateway.v1 import gateway_pb2_grpc as rpc  # noqa: E402


def ask(resource, cost):
    return pb.AuthorizeRequest(
        dct=token,
        request=pb.CapabilityRequest(namespace="docs", action="read", resource=resource),
        cost_microcents=cost,
    )


out = {}
with grpc.insecure_channel(addr) as channel:
    stub = rpc.DelegationGatewayStub(channel)
    allowed = stub.Authorize(ask("/project/a", 300), timeout=10)
    out["allowed"] = {
        "reservation_id": allowed.reservation_id,
        "tenant": allowed.tenant,
        "scope_delegation_id": allowed.scope.delegation_id,
        "deadline_seconds": allowed.deadline_time.seconds,
    }
    # The holder proves it made the reservation with its DCT.
    settled = stub.Settle(
        pb.SettleRequest(reservation_id=allowed.reservation_id, actual_microcents=120),
        timeout=10,
        metadata=[("authorization", "DCT " + token)],
    )
    out["settled"] = {"charged": settled.charged_microcents, "released": settled.released_microcents}
    budget = stub.GetBudget(
        pb.GetBudgetRequest(delegation_id=allowed.scope.delegation_id), timeout=10
    )
    level = budget.chains[0].levels[0]
    out["budget"] = {"spent": level.spent_microcents, "remaining": level.remaining_microcents}
    try:
        stub.Authorize(ask("/etc/passwd", 1), timeout=10)
        out["denied"] = None
    except grpc.RpcError as e:
        status = rpc_status.from_call(e)
        info = error_details_pb2.ErrorInfo()
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                detail.Unpack(info)
        out["denied"] = {
            "code": e.code().name,
            "reason": info.reason,
            "domain": info.domain,
            "requested_resource": info.metadata["requested_resource"],
        }
print(json.dumps(out))
