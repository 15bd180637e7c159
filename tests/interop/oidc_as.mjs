// A real OAuth 2.1 / OpenID authorization server for tests/connections.rs:
// panva's `oidc-provider` (npm, OpenID-certified) with its development
// login and consent pages, PKCE, resource indicators (RFC 8707), `iss` in
// the authorization response (RFC 9207), token introspection (RFC 7662,
// for the MCP server's verifier) and revocation (RFC 7009). The glue here
// only registers the two clients and starts it on 127.0.0.1.
// Usage: node oidc_as.mjs <redirect_uri> [--wrong-audience] [--access-ttl N]
//   prints {"issuer": ...}
//   clients: `turnstile` (public, PKCE, the redirect given)
//            `notes-rs` / `rs-secret` (the MCP server: introspection only)
//   --wrong-audience: access tokens are JWTs for `urn:another-api`,
//            whatever resource was asked for (a misbehaving server).
//   --access-ttl N: access tokens live N seconds (default 3600); refresh
//            tokens are issued to a client allowed the refresh_token grant.
import http from "node:http";
import Provider from "oidc-provider";

const redirect = process.argv[2];
const wrongAudience = process.argv.includes("--wrong-audience");
const ttlAt = process.argv.indexOf("--access-ttl");
const accessTtl = ttlAt > 0 ? Number(process.argv[ttlAt + 1]) : 3600;
if (!redirect) { console.error("usage: node oidc_as.mjs <redirect_uri>"); process.exit(2); }

const server = http.createServer();
server.listen(0, "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: [
      { client_id: "turnstile", token_endpoint_auth_method: "none", application_type: "native",
        redirect_uris: [redirect], grant_types: ["authorization_code", "refresh_token"], response_types: ["code"] },
      { client_id: "notes-rs", client_secret: "rs-secret", grant_types: [], redirect_uris: [], response_types: [] },
    ],
    scopes: ["openid", "offline_access", "notes:read", "notes:write"],
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: true },
      introspection: { enabled: true, allowedPolicy: () => true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => undefined,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource) => ({
          audience: wrongAudience ? "urn:another-api" : resource,
          scope: "notes:read notes:write",
          accessTokenTTL: accessTtl,
          accessTokenFormat: wrongAudience ? "jwt" : "opaque",
        }),
      },
    },
    findAccount: (ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
    issueRefreshToken: (ctx, client) => client.grantTypeAllowed("refresh_token"),
  });
  provider.on("server_error", (ctx, err) => console.error(err));
  server.on("request", provider.callback());
  console.log(JSON.stringify({ issuer }));
});
for (const s of ["SIGINT", "SIGTERM"]) process.on(s, () => process.exit(0));
