// A real OpenID provider for the token exchange tests (issue 35):
// oidc-provider with a test user base, auto-login and auto-consent.
//   node oidc-idp.mjs DGW_RESOURCE [DGW_CALLBACK]
// prints "oidc-idp listening port=N". Its issuer is http://127.0.0.1:N.
// Clients: `dgw` (the audience of its ID tokens: dgw as the IdP's client,
// secret `dgw-client-secret` by HTTP Basic, redirects http://127.0.0.1/cb
// and, for dgw's own login flow, DGW_CALLBACK) and `robot`
// (client_credentials, secret `robot-secret`), whose access tokens for
// the resource DGW_RESOURCE are JWTs with `aud` "dgw" and the client's
// `groups`. Users: alice (groups engineering), bob (groups sales).
// A login page answers at once for the login_hint's user, else the user
// chosen last with POST /__login?sub=bob (alice at first).
// Test controls, outside the OIDC surface:
//   GET /__id_token?sub=alice&nonce=N  the provider's own ID token for the
//     user, by running its authorization code flow (+PKCE) as client dgw
//   GET /__access_token?client=robot   a JWT access token (client_credentials)
//   POST /__sign {key, header, claims}  a JWT signed with key "idp" (the
//     provider's own key, in its JWKS), "stranger" (a key it never
//     published), "client" (the private_key_jwt client's), "none" (alg
//     none, unsigned) or "hs256-public" (HS256 with the provider's public
//     key, PEM, as the secret)
//   GET /__client_jwks                  the client key's public JWKS
//   GET /__jwks_fetches                 how many times /jwks was fetched
import { createServer } from "node:http";
import { createHash, createHmac, randomBytes } from "node:crypto";
import Provider from "oidc-provider";
import { SignJWT, exportJWK, exportSPKI, generateKeyPair } from "jose";
import { memoryAdapter } from "./oidc-memory.mjs";

const [resource, dgwCallback] = process.argv.slice(2);
let nextLogin = "alice";
const USERS = { alice: ["engineering"], bob: ["sales"] };
const CLIENT_GROUPS = { robot: ["engineering"] };

const idpKeys = await generateKeyPair("RS256", { extractable: true });
const idpJwk = { ...(await exportJWK(idpKeys.privateKey)), kid: "idp-1", alg: "RS256", use: "sig" };
const stranger = await generateKeyPair("RS256", { extractable: true });
const clientKeys = await generateKeyPair("ES256", { extractable: true });
const clientPublic = { ...(await exportJWK(clientKeys.publicKey)), kid: "client-1", alg: "ES256", use: "sig" };
const idpPem = await exportSPKI(idpKeys.publicKey);

const MemoryAdapter = memoryAdapter();

let jwksFetches = 0;
const server = createServer();
server.listen(0, "127.0.0.1", () => {
  const port = server.address().port;
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    adapter: MemoryAdapter,
    jwks: { keys: [idpJwk] },
    cookies: { keys: [randomBytes(16).toString("hex")] },
    clients: [
      {
        client_id: "dgw",
        client_secret: "dgw-client-secret",
        application_type: "native",
        grant_types: ["authorization_code"],
        redirect_uris: ["http://127.0.0.1/cb", ...(dgwCallback ? [dgwCallback] : [])],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
      {
        client_id: "robot",
        client_secret: "robot-secret",
        grant_types: ["client_credentials"],
        redirect_uris: [],
        response_types: [],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    // The ID token carries the groups with `openid` alone, as dgw's login
    // asks only for it.
    claims: { openid: ["sub", "groups"], groups: ["groups"] },
    scopes: ["openid", "groups", "tools"],
    conformIdTokenClaims: false,
    async findAccount(_ctx, sub) {
      if (!USERS[sub]) return undefined;
      return { accountId: sub, claims: async () => ({ sub, groups: USERS[sub] }) };
    },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (_ctx, _client, oneOf) => oneOf ?? undefined,
        getResourceServerInfo: (_ctx, indicator) => {
          if (indicator !== resource) throw new Error("unknown resource");
          return { scope: "tools", audience: "dgw", accessTokenFormat: "jwt", jwt: { sign: { alg: "RS256" } } };
        },
      },
    },
    extraTokenClaims: async (_ctx, token) =>
      token.kind === "ClientCredentials" ? { groups: CLIENT_GROUPS[token.clientId] ?? [] } : undefined,
  });
  const callback = provider.callback();

  // Auto-login (the login_hint's user) and auto-consent.
  async function interaction(req, res) {
    const details = await provider.interactionDetails(req, res);
    const { prompt, params, session } = details;
    if (prompt.name === "login") {
      await provider.interactionFinished(req, res, { login: { accountId: params.login_hint ?? nextLogin } }, { mergeWithLastSubmission: false });
      return;
    }
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(" "));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    await provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: true });
  }

  // The authorization code flow, driven with plain HTTP and a cookie jar.
  async function idToken(sub, nonce) {
    const jar = new Map();
    const verifier = randomBytes(32).toString("base64url");
    const challenge = createHash("sha256").update(verifier).digest("base64url");
    const q = new URLSearchParams({
      client_id: "dgw", response_type: "code", scope: "openid groups", redirect_uri: "http://127.0.0.1/cb",
      state: "s", nonce, login_hint: sub, code_challenge: challenge, code_challenge_method: "S256",
    });
    let url = `${issuer}/auth?${q}`;
    for (let hops = 0; hops < 10; hops += 1) {
      const r = await fetch(url, {
        redirect: "manual",
        headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") },
      });
      for (const c of r.headers.getSetCookie()) {
        const [pair] = c.split(";");
        const i = pair.indexOf("=");
        jar.set(pair.slice(0, i), pair.slice(i + 1));
      }
      const location = r.headers.get("location");
      if (!location) throw new Error(`no redirect from ${url}: ${r.status} ${await r.text()}`);
      const next = new URL(location, url);
      if (next.origin + next.pathname === "http://127.0.0.1/cb") {
        const code = next.searchParams.get("code");
        if (!code) throw new Error(`no code: ${next}`);
        const t = await fetch(`${issuer}/token`, {
          method: "POST",
          headers: {
            "content-type": "application/x-www-form-urlencoded",
            authorization: `Basic ${Buffer.from("dgw:dgw-client-secret").toString("base64")}`,
          },
          body: new URLSearchParams({
            grant_type: "authorization_code", code, redirect_uri: "http://127.0.0.1/cb", code_verifier: verifier,
          }),
        });
        const body = await t.json();
        if (!body.id_token) throw new Error(`no id_token: ${JSON.stringify(body)}`);
        return body.id_token;
      }
      url = next.toString();
    }
    throw new Error("too many redirects");
  }

  async function accessToken(client) {
    const secret = { robot: "robot-secret" }[client];
    const t = await fetch(`${issuer}/token`, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: `Basic ${Buffer.from(`${client}:${secret}`).toString("base64")}`,
      },
      body: new URLSearchParams({ grant_type: "client_credentials", resource, scope: "tools" }),
    });
    const body = await t.json();
    if (!body.access_token) throw new Error(`no access_token: ${JSON.stringify(body)}`);
    return body.access_token;
  }

  async function sign({ key, header, claims }) {
    const b64 = (v) => Buffer.from(JSON.stringify(v)).toString("base64url");
    if (key === "none") return `${b64({ ...header, alg: "none" })}.${b64(claims)}.`;
    if (key === "hs256-public") {
      const input = `${b64({ ...header, alg: "HS256" })}.${b64(claims)}`;
      return `${input}.${createHmac("sha256", idpPem).update(input).digest("base64url")}`;
    }
    const signing = { idp: idpKeys.privateKey, stranger: stranger.privateKey, client: clientKeys.privateKey }[key];
    const alg = key === "client" ? "ES256" : "RS256";
    return new SignJWT(claims).setProtectedHeader({ alg, ...header }).sign(signing);
  }

  const json = (res, value) => {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify(value));
  };
  server.on("request", async (req, res) => {
    try {
      const url = new URL(req.url, issuer);
      if (url.pathname === "/jwks") jwksFetches += 1;
      if (url.pathname.startsWith("/interaction/")) return await interaction(req, res);
      if (req.method === "POST" && url.pathname === "/__login") {
        nextLogin = url.searchParams.get("sub");
        return res.writeHead(204).end();
      }
      if (url.pathname === "/__id_token") {
        return json(res, { id_token: await idToken(url.searchParams.get("sub"), url.searchParams.get("nonce") ?? "n") });
      }
      if (url.pathname === "/__access_token") return json(res, { access_token: await accessToken(url.searchParams.get("client")) });
      if (url.pathname === "/__client_jwks") return json(res, { keys: [clientPublic] });
      if (url.pathname === "/__jwks_fetches") return json(res, { fetches: jwksFetches });
      if (url.pathname === "/__sign") {
        let body = "";
        for await (const chunk of req) body += chunk;
        return json(res, { jwt: await sign(JSON.parse(body)) });
      }
      return callback(req, res);
    } catch (e) {
      res.writeHead(500, { "content-type": "text/plain" });
      res.end(String(e?.stack ?? e));
    }
  });
  console.log(`oidc-idp listening port=${port}`);
});
