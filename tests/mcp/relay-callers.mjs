// Callers of upstreams' requests through dgw (tests/mcp_relay.rs, issue 33).
//   node relay-callers.mjs two URL TOKEN TOOL
//     Two official TypeScript SDK clients, each declaring sampling and
//     elicitation, call TOOL at once with {message: "for A"} / {message:
//     "for B"}; each answers what it is asked with its own name. Prints
//     what each was asked and the result it got.
//   node relay-callers.mjs stdio LAUNCH_JSON - TOOL
//     The SDK client launching `dgw mcp` as a host does ({command, args,
//     env}), declaring elicitation, calls TOOL with {message: "for S"} and
//     answers what it is asked. Prints what it was asked and the result.
//   node relay-callers.mjs cross URL TOKEN TOOL
//     Raw: caller A calls TOOL on an event stream; when the upstream's
//     request reaches A, caller B (another session) answers its id first,
//     then A answers, then A answers again. Prints every status and A's result.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema, CreateMessageRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, url, token, tool] = process.argv.slice(2);
const auth = { Authorization: `DCT ${token}` };

async function sdkCaller(who) {
  let transport;
  if (mode === "stdio") {
    const launch = JSON.parse(url);
    transport = new StdioClientTransport({
      command: launch.command,
      args: launch.args,
      env: { ...getDefaultEnvironment(), ...launch.env },
      stderr: "ignore",
    });
  } else {
    transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth } });
  }
  const client = new Client({ name: `caller-${who}`, version: "1.0.0" }, { capabilities: { elicitation: {}, sampling: {} } });
  const asked = [];
  client.setRequestHandler(ElicitRequestSchema, async (r) => {
    asked.push(r.params.message);
    return { action: "accept", content: { username: who, email: `${who}@example.com` } };
  });
  client.setRequestHandler(CreateMessageRequestSchema, async (r) => {
    asked.push(`sampling: ${JSON.stringify(r.params.messages)}`);
    return { role: "assistant", content: { type: "text", text: `from ${who}` }, model: "m" };
  });
  await client.connect(transport);
  const result = await client.callTool({ name: tool, arguments: { message: `for ${who}` } });
  if (mode !== "stdio") await transport.terminateSession();
  await client.close();
  return { asked, result };
}

async function post(session, body, accept = "application/json, text/event-stream") {
  const headers = { ...auth, "content-type": "application/json", accept, "mcp-protocol-version": "2025-11-25" };
  if (session) headers["mcp-session-id"] = session;
  return fetch(url, { method: "POST", headers, body: JSON.stringify(body) });
}

async function rawSession(who) {
  const r = await post(null, {
    jsonrpc: "2.0", id: 0, method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities: { elicitation: {} }, clientInfo: { name: who, version: "1" } },
  }, "application/json");
  const session = r.headers.get("mcp-session-id");
  await r.text();
  await (await post(session, { jsonrpc: "2.0", method: "notifications/initialized" })).text();
  return session;
}

/** Reads events off an SSE body: yields each event's JSON. */
async function* events(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
      if (data) yield JSON.parse(data);
    }
  }
}

async function cross() {
  const a = await rawSession("A");
  const b = await rawSession("B");
  const out = {};
  const r = await post(a, { jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: tool, arguments: { message: "for A" } } });
  out.contentType = r.headers.get("content-type");
  for await (const m of events(r.body)) {
    if (m.method) {
      out.asked = m;
      const bad = await post(b, { jsonrpc: "2.0", id: m.id, result: { action: "accept", content: { username: "mallory", email: "m@example.com" } } });
      out.other = { status: bad.status, body: await bad.text() };
      const good = await post(a, { jsonrpc: "2.0", id: m.id, result: { action: "accept", content: { username: "A", email: "a@example.com" } } });
      out.own = { status: good.status };
      await good.text();
      const again = await post(a, { jsonrpc: "2.0", id: m.id, result: { action: "accept", content: { username: "replay", email: "r@example.com" } } });
      out.replayed = { status: again.status, body: await again.text() };
    } else if (m.id === 7) {
      out.result = m;
    }
  }
  return out;
}

const out =
  mode === "two"
    ? Object.fromEntries(await Promise.all(["A", "B"].map(async (w) => [w, await sdkCaller(w)])))
    : mode === "stdio"
      ? await sdkCaller("S")
      : await cross();
console.log(JSON.stringify(out));
