# The official Python MCP SDK's client (`mcp` 2.x, pinned in
# tests/requirements.txt) against dgw's /mcp, for tests: presents a DCT in
# the Authorization header of every request, in the protocol mode given
# ("legacy": the initialize handshake and a session; "2026-07-28": probe
# `server/discover`, which must choose the stateless revision), then runs the steps given and prints one JSON object
# with what each step answered or the error it raised.
#   python py-client.py URL TOKEN MODE '[["call_tool", "echo", {"text": "hi"}], ...]'
# Steps: ["list_tools"], ["call_tool", NAME, ARGS], ["list_resources"],
# ["read_resource", URI], ["list_prompts"], ["get_prompt", NAME, ARGS].
import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def dump(result):
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main(url, token, mode, steps):
    http = httpx2.AsyncClient(headers={"Authorization": f"DCT {token}"}, timeout=30)
    out = {"steps": []}
    # "2026-07-28": the SDK probes server/discover and must choose it.
    negotiate = "auto" if mode == "2026-07-28" else mode
    async with Client(streamable_http_client(url, http_client=http), mode=negotiate, cache=None) as client:
        out["protocolVersion"] = client.protocol_version
        out["server"] = client.server_info.name if client.server_info else None
        for step in steps:
            op, *args = step
            try:
                result = await getattr(client, op)(*args)
                out["steps"].append({"result": dump(result)})
            except MCPError as e:
                out["steps"].append({"error": {"code": e.error.code, "message": e.error.message, "data": e.error.data}})
    print(json.dumps(out))


if __name__ == "__main__":
    url, token, mode, steps = sys.argv[1:5]
    asyncio.run(main(url, token, mode, json.loads(steps)))
