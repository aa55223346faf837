// A real OpenID Connect provider for tests: oidc-provider as an
// enterprise identity provider with two users and auto-consent, for dgw
// to log people in at (the authorization code flow, dgw as client `dgw`
// with client_secret_basic; its secret read from argv[2]'s file, its
// redirect URI argv[3]). The ID token carries `groups`.
//   node oidc-idp.mjs SECRET_FILE REDIRECT_URI
// prints "oidc-idp listening port=N". The login and consent pages are
// answered at once for the user chosen (default alice): a test picks
// another with POST /__login?sub=bob, outside the OpenID surface.
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import Provider from "oidc-provider";

const [secretFile, redirectUri] = process.argv.slice(2);
const USERS = {
  alice: { email: "alice@corp.example", groups: ["engineering", "staff"] },
  bob: { email: "bob@corp.example", groups: ["sales"] },
};
let nextLogin = "alice";

const server = createServer();
server.listen(0, "127.0.0.1", () => {
  const port = server.address().port;
  const provider = new Provider(`http://127.0.0.1:${port}`, {
    clients: [
      {
        client_id: "dgw",
        client_secret: readFileSync(secretFile, "utf8").trim(),
        grant_types: ["authorization_code"],
        redirect_uris: [redirectUri],
        response_types: ["code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    claims: { openid: ["sub", "groups", "email"] },
    // The claims of the scopes asked for go in the ID token itself.
    conformIdTokenClaims: false,
    async findAccount(ctx, sub) {
      if (!USERS[sub]) return undefined;
      return { accountId: sub, claims: async () => ({ sub, ...USERS[sub] }) };
    },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    cookies: { keys: ["oidc-idp-test-cookie-key"] },
    ttl: { AuthorizationCode: 60, IdToken: 300, AccessToken: 300, Session: 600, Interaction: 600, Grant: 600 },
  });
  const callback = provider.callback();
  server.on("request", async (req, res) => {
    try {
      const url = new URL(req.url, `http://127.0.0.1:${port}`);
      if (req.method === "POST" && url.pathname === "/__login") {
        nextLogin = url.searchParams.get("sub");
        res.writeHead(204).end();
      } else if (url.pathname.startsWith("/interaction/")) {
        // The user logs in, then consents to everything asked.
        const details = await provider.interactionDetails(req, res);
        if (details.prompt.name === "login") {
          await provider.interactionFinished(req, res, { login: { accountId: nextLogin } }, { mergeWithLastSubmission: false });
        } else {
          const grant = new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
          const missing = details.prompt.details;
          if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(" "));
          if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
          await provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: true });
        }
      } else {
        callback(req, res);
      }
    } catch (e) {
      res.writeHead(500).end(String(e));
    }
  });
  console.log(`oidc-idp listening port=${port}`);
});
