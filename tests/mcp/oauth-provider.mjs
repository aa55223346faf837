// A real OAuth 2.0 authorization server for tests: oidc-provider with the
// client_credentials grant and token introspection. Clients: the one dgw
// uses (`dgw`, secret read from argv[2]'s file, client_secret_basic) and
// the upstream resource server (`upstream`, secret `upstream-secret`),
// which introspects the tokens it is shown.
//   node oauth-provider.mjs SECRET_FILE TTL_SECONDS
// prints "oauth-provider listening port=N". Test controls, outside the
// OAuth surface: GET /__issued answers how many tokens were issued,
// POST /__revoke_all destroys every issued token.
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import Provider from "oidc-provider";
import { memoryAdapter } from "./oidc-memory.mjs";

const [secretFile, ttl] = process.argv.slice(2);
let issued = 0;
const MemoryAdapter = memoryAdapter((name) => {
  if (name === "ClientCredentials") issued += 1;
});
const store = MemoryAdapter.store;

const server = createServer();
server.listen(0, "127.0.0.1", () => {
  const port = server.address().port;
  const provider = new Provider(`http://127.0.0.1:${port}`, {
    adapter: MemoryAdapter,
    clients: [
      {
        client_id: "dgw",
        client_secret: readFileSync(secretFile, "utf8").trim(),
        grant_types: ["client_credentials"],
        redirect_uris: [],
        response_types: [],
        token_endpoint_auth_method: "client_secret_basic",
        scope: "mcp:call",
      },
      {
        client_id: "upstream",
        client_secret: "upstream-secret",
        grant_types: [],
        redirect_uris: [],
        response_types: [],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    scopes: ["mcp:call"],
    features: {
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      devInteractions: { enabled: false },
    },
    ttl: { ClientCredentials: Number(ttl) },
  });
  const callback = provider.callback();
  server.on("request", (req, res) => {
    if (req.url === "/__issued") {
      res.setHeader("content-type", "text/plain");
      res.end(String(issued));
    } else if (req.url === "/__revoke_all") {
      for (const k of [...store.keys()]) if (k.startsWith("ClientCredentials:")) store.delete(k);
      res.writeHead(204).end();
    } else {
      callback(req, res);
    }
  });
  console.log(`oauth-provider listening port=${port}`);
});
