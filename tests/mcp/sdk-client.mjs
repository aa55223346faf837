// The official TypeScript MCP client against dgw's /mcp, for tests:
// connects over Streamable HTTP presenting a DCT in the Authorization
// header, lists tools, then makes each call given; prints one JSON object.
// A call with "abortAfterMs" is cancelled that long after it is sent.
//   node sdk-client.mjs URL TOKEN '[{"name":..., "arguments":{...}}, ...]'
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, callsJson] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `DCT ${token}` } },
});
const client = new Client({ name: "dgw-test-client", version: "1.0.0" });
await client.connect(transport);
const out = {
  server: client.getServerVersion(),
  sessionId: transport.sessionId,
  tools: (await client.listTools()).tools.map((t) => t.name),
  calls: [],
};
for (const { abortAfterMs, ...call } of JSON.parse(callsJson ?? "[]")) {
  const controller = new AbortController();
  if (abortAfterMs !== undefined) setTimeout(() => controller.abort("test"), abortAfterMs);
  try {
    out.calls.push({ result: await client.callTool(call, undefined, { signal: controller.signal }) });
  } catch (e) {
    out.calls.push({
      error: { code: e.code, message: e.message, data: e.data },
      aborted: controller.signal.aborted,
    });
  }
}
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(out));
