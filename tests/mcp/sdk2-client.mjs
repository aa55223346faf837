// The official TypeScript MCP SDK v2 client (@modelcontextprotocol/client,
// pinned in tests/package.json) against dgw's /mcp, for tests: presents a
// DCT in the Authorization header of every request, speaking the revision
// given ("legacy": the initialize handshake and a session; "2026-07-28":
// probe `server/discover`, which must choose the stateless revision), runs the steps given and prints one
// JSON object with what each answered or the error it raised. Needs Node 22.
//   node sdk2-client.mjs URL TOKEN MODE '[["callTool", {"name": "echo", "arguments": {...}}], ...]'
// Steps: a Client method and its one argument (listTools, callTool,
// listResources, readResource, listPrompts, getPrompt).
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, token, mode, stepsJson] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `DCT ${token}` } },
});
const client = new Client(
  { name: "dgw-test-client-v2", version: "1.0.0" },
  // "2026-07-28": probe server/discover, which must choose it.
  { versionNegotiation: { mode: mode === "legacy" ? "legacy" : "auto" } },
);
await client.connect(transport);
const out = { protocolVersion: client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion, server: client.getServerVersion()?.name, steps: [] };
for (const [op, arg] of JSON.parse(stepsJson ?? "[]")) {
  try {
    out.steps.push({ result: await client[op](arg) });
  } catch (e) {
    out.steps.push({ error: { code: e.code, message: e.message, data: e.data } });
  }
}
await client.close();
console.log(JSON.stringify(out));
