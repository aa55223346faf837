// An MCP host logging its user in to dgw with the official TypeScript SDK
// v2 client's own OAuth flow (@modelcontextprotocol/client, its
// OAuthClientProvider): connecting to URL without a token gets dgw's 401,
// from which the SDK discovers dgw's metadata and sends the user (the
// browser of oauth-browser.mjs) to /oauth/authorize with PKCE; dgw sends
// them on to the identity provider and back with a code, which the SDK
// redeems, and the host connects again with the DCT it got and runs the
// steps given. Prints one JSON object: the authorization URL, the
// callback, the tokens, and each step's result or error. Needs Node 22.
//   node oauth-host.mjs URL REDIRECT_URL CLIENT_ID '[["callTool", {...}], ...]'
import { randomUUID } from "node:crypto";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { browse } from "./oauth-browser.mjs";

const [url, redirectUrl, clientId, stepsJson] = process.argv.slice(2);

class Host {
  constructor() {
    this.saved = {};
  }
  get redirectUrl() {
    return redirectUrl;
  }
  get clientMetadata() {
    return {
      client_name: "dgw test host",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  state() {
    this.sentState = randomUUID();
    return this.sentState;
  }
  clientInformation() {
    return { client_id: clientId };
  }
  tokens() {
    return this.saved.tokens;
  }
  saveTokens(tokens) {
    this.saved.tokens = tokens;
  }
  async redirectToAuthorization(authorizationUrl) {
    this.authorizationUrl = authorizationUrl.href;
    this.landed = await browse(authorizationUrl.href, redirectUrl);
  }
  saveCodeVerifier(v) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
  saveDiscoveryState(s) {
    this.discovery = s;
  }
  discoveryState() {
    return this.discovery;
  }
}

const host = new Host();
const out = { steps: [] };
// Every request the SDK makes, for a failure's report.
const seen = [];
const fetchLogged = async (input, init) => {
  const headers = new Headers(init?.headers);
  const res = await fetch(input, init);
  const challenge = res.headers.get("www-authenticate") ?? "";
  seen.push(`${init?.method ?? "GET"} ${input} ${res.status} ${challenge} auth=${(headers.get("authorization") ?? "-").slice(0, 24)} session=${headers.get("mcp-session-id") ?? "-"}`);
  return res;
};
const connect = async () => {
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: host, fetch: fetchLogged });
  const client = new Client({ name: "dgw-oauth-host", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
};
let first;
try {
  first = await connect();
} catch (e) {
  if (!host.landed) throw e;
}
out.authorizationUrl = host.authorizationUrl;
out.landed = host.landed;
if (first) throw new Error("connected without logging in");
if (!host.landed.stopped) {
  console.log(JSON.stringify(out));
  process.exit(0);
}
const callback = new URL(host.landed.stopped);
out.callback = callback.href;
if (callback.searchParams.get("state") !== host.sentState) throw new Error("the state did not come back");
const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: host, fetch: fetchLogged });
await transport.finishAuth(callback.searchParams);
out.tokens = host.saved.tokens;
const { client } = await connect();
for (const [op, arg] of JSON.parse(stepsJson ?? "[]")) {
  try {
    out.steps.push({ result: await client[op](arg) });
  } catch (e) {
    out.steps.push({ error: { code: e.code, message: e.message, data: e.data } });
  }
}
await client.close();
out.requests = seen;
console.log(JSON.stringify(out));
