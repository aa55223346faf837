// The official TypeScript MCP client launching `dgw mcp` as a host does
// (a desktop host's or an IDE's launcher config): a command, its
// arguments, its environment and its directory. Lists tools, makes each
// call given (a call may carry its own `_meta`-free `_delegateos` in
// "delegateos"), prints one JSON object.
//   node sdk-stdio-client.mjs '{"command":..., "args":[...], "env":{...}, "cwd":...}' '[{"name":..., "arguments":{...}}]'
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  StdioClientTransport,
  getDefaultEnvironment,
} from "@modelcontextprotocol/sdk/client/stdio.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const [launchJson, callsJson] = process.argv.slice(2);
const launch = JSON.parse(launchJson);
const transport = new StdioClientTransport({
  command: launch.command,
  args: launch.args,
  env: { ...getDefaultEnvironment(), ...launch.env },
  cwd: launch.cwd,
  stderr: "ignore",
});
const client = new Client({ name: "dgw-test-host", version: "1.0.0" });
await client.connect(transport);
const out = {
  server: client.getServerVersion(),
  tools: (await client.listTools()).tools.map((t) => t.name),
  calls: [],
};
for (const { delegateos, ...call } of JSON.parse(callsJson ?? "[]")) {
  try {
    const params = delegateos ? { ...call, _delegateos: delegateos } : call;
    out.calls.push({
      result: await client.request({ method: "tools/call", params }, CallToolResultSchema),
    });
  } catch (e) {
    out.calls.push({ error: { code: e.code, message: e.message, data: e.data } });
  }
}
await client.close();
console.log(JSON.stringify(out));
