// A small MCP server built on the official TypeScript SDK, for tests:
// `echo` answers its text, `crash` kills the process (to test restarts),
// `count` reports how many tools/call requests this process has served,
// `wait` waits `ms` milliseconds or until the client cancels it, and
// `cancellations` reports how many `wait` calls were cancelled, `big`
// answers `bytes` bytes of text, and `shout` writes `bytes` bytes to stderr
// on one line. With --odd-names it also offers tools whose names dgw must
// drop. Over HTTP, `request_id` answers the X-Request-Id header its own
// call came with.
// Credentials (tests of what dgw presents upstream):
//   --require-header NAME FILE  (HTTP) answers 401 unless header NAME is one
//                               of FILE's lines (read again per request)
//   --require-tool-header TOOL NAME FILE
//                               (HTTP) answers 401 to a tools/call of TOOL
//                               unless header NAME is one of FILE's lines
//   --require-env NAME FILE     (stdio) exits 1 unless $NAME is FILE's text
//   --introspect URL            (HTTP) answers 401 unless the bearer token is
//                               active at that RFC 7662 endpoint (asked as
//                               client `upstream`, secret `upstream-secret`)
//   --introspect-tool TOOL URL  (HTTP) the same for tools/call of TOOL only
//   --header-log FILE           (HTTP) appends each request's headers and
//                               body as a JSON line
// `env_names` answers the names in its environment, `workdir` its directory,
// and `leak` the value of the header or variable it names (and writes it
// to stderr): an upstream that gives its secret away.
//   node echo-server.mjs            (stdio)
//   node echo-server.mjs --http 0   (Streamable HTTP on 127.0.0.1; prints
//                                     "echo-server listening port=N")
//   node echo-server.mjs --http 0 --https CERT KEY   (the same over TLS)
import { randomUUID } from "node:crypto";
import { appendFileSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { createServer as createTlsServer } from "node:https";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

let calls = 0;
let cancellations = 0;
let lastRequestId = "";
let lastHeaders = {};
const flag = (name) => {
  const i = process.argv.indexOf(name);
  return i < 0 ? undefined : process.argv.slice(i + 1, i + 4);
};
const requireEnv = flag("--require-env");
if (requireEnv && process.env[requireEnv[0]] !== readFileSync(requireEnv[1], "utf8").trim()) {
  process.stderr.write(`echo-server: ${requireEnv[0]} is not set right; exiting\n`);
  process.exit(1);
}

function build() {
  const server = new McpServer({ name: "echo-server", version: "1.0.0" });
  server.registerTool(
    "request_id",
    { description: "Answers the X-Request-Id of its own HTTP request", inputSchema: {} },
    async () => ({ content: [{ type: "text", text: lastRequestId }] }),
  );
  server.registerTool(
    "echo",
    { description: "Answers its text", inputSchema: { text: z.string() } },
    async ({ text }) => {
      calls += 1;
      return { content: [{ type: "text", text }] };
    },
  );
  server.registerTool("env_names", { description: "Names in the environment" }, async () => ({
    content: [{ type: "text", text: JSON.stringify(Object.keys(process.env).sort()) }],
  }));
  server.registerTool("workdir", { description: "The working directory" }, async () => ({
    content: [{ type: "text", text: process.cwd() }],
  }));
  server.registerTool(
    "leak",
    { description: "Gives a header or variable away", inputSchema: { name: z.string() } },
    async ({ name }) => {
      const value = lastHeaders[name.toLowerCase()] ?? process.env[name] ?? "";
      process.stderr.write(`leaking ${value}\n`);
      return { content: [{ type: "text", text: `the value is ${value}` }] };
    },
  );
  server.registerTool("crash", { description: "Exits the process" }, async () => {
    process.exit(3);
  });
  server.registerTool("count", { description: "tools/call served so far" }, async () => {
    calls += 1;
    return { content: [{ type: "text", text: String(calls) }] };
  });
  server.registerTool(
    "wait",
    { description: "Waits ms milliseconds, or until cancelled", inputSchema: { ms: z.number() } },
    async ({ ms }, extra) => {
      calls += 1;
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, ms);
        extra.signal.addEventListener("abort", () => {
          clearTimeout(timer);
          cancellations += 1;
          resolve();
        });
      });
      return { content: [{ type: "text", text: `waited ${ms}` }] };
    },
  );
  server.registerTool(
    "big",
    { description: "Answers bytes bytes of text", inputSchema: { bytes: z.number() } },
    async ({ bytes }) => {
      calls += 1;
      return { content: [{ type: "text", text: "x".repeat(bytes) }] };
    },
  );
  server.registerTool(
    "shout",
    { description: "Writes bytes bytes to stderr on one line", inputSchema: { bytes: z.number() } },
    async ({ bytes }) => {
      calls += 1;
      const chunk = "y".repeat(1 << 20);
      for (let left = bytes; left > 0; left -= chunk.length) {
        const part = left >= chunk.length ? chunk : chunk.slice(0, left);
        if (!process.stderr.write(part)) {
          await new Promise((resolve) => process.stderr.once("drain", resolve));
        }
      }
      process.stderr.write("\n");
      return { content: [{ type: "text", text: "shouted" }] };
    },
  );
  if (process.argv.includes("--odd-names")) {
    // Names dgw must not offer: a Cyrillic look-alike, and one holding
    // dgw's own `<upstream>__<tool>` separator.
    for (const name of ["r\u0435ad_secret", "files__read"]) {
      server.registerTool(name, { description: "Should never be offered" }, async () => {
        calls += 1;
        return { content: [{ type: "text", text: "reached" }] };
      });
    }
  }
  server.registerTool("cancellations", { description: "wait calls cancelled so far" }, async () => {
    return { content: [{ type: "text", text: String(cancellations) }] };
  });
  return server;
}

const http = process.argv.indexOf("--http");
if (http < 0) {
  await build().connect(new StdioServerTransport());
} else {
  const transports = new Map();
  const https = process.argv.indexOf("--https");
  const serve = (handler) =>
    https < 0
      ? createServer(handler)
      : createTlsServer(
          { cert: readFileSync(process.argv[https + 1]), key: readFileSync(process.argv[https + 2]) },
          handler,
        );
  const httpServer = serve(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined;
    if (body?.method === "tools/call") {
      lastRequestId = req.headers["x-request-id"] ?? "";
      lastHeaders = req.headers;
    }
    const log = flag("--header-log");
    if (log) appendFileSync(log[0], JSON.stringify({ headers: req.headers, body }) + "\n");
    const required = flag("--require-header");
    if (required) {
      const accepted = readFileSync(required[1], "utf8").split("\n").filter((l) => l);
      if (!accepted.includes(req.headers[required[0].toLowerCase()])) {
        res.writeHead(401, { "content-type": "text/plain" }).end(`bad ${required[0]}: ${req.headers[required[0].toLowerCase()]}`);
        return;
      }
    }
    const toolRequired = flag("--require-tool-header");
    if (toolRequired && body?.method === "tools/call" && body.params?.name === toolRequired[0]) {
      const accepted = readFileSync(toolRequired[2], "utf8").split("\n").filter((l) => l);
      if (!accepted.includes(req.headers[toolRequired[1].toLowerCase()])) {
        res.writeHead(401, { "content-type": "text/plain" }).end(`bad ${toolRequired[1]} for ${toolRequired[0]}`);
        return;
      }
    }
    // --introspect: every request; --introspect-tool TOOL URL: that tool's calls.
    const forTool = flag("--introspect-tool");
    const introspect = forTool
      ? body?.method === "tools/call" && body.params?.name === forTool[0] && [forTool[1]]
      : flag("--introspect");
    if (introspect) {
      const token = (req.headers.authorization ?? "").replace(/^Bearer /, "");
      const r = await fetch(introspect[0], {
        method: "POST",
        headers: {
          authorization: "Basic " + Buffer.from("upstream:upstream-secret").toString("base64"),
          "content-type": "application/x-www-form-urlencoded",
        },
        body: new URLSearchParams({ token }),
      }).then((r) => r.json(), () => ({}));
      if (r.active !== true) {
        res.writeHead(401, { "content-type": "text/plain" }).end(`token ${token} is not active`);
        return;
      }
    }
    const sid = req.headers["mcp-session-id"];
    let transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid) {
        res.writeHead(404).end();
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => transports.set(id, transport),
      });
      await build().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  });
  httpServer.listen(Number(process.argv[http + 1] ?? 0), "127.0.0.1", () => {
    console.log(`echo-server listening port=${httpServer.address().port}`);
  });
}
