// A real OpenID Connect provider for tests/oidc.rs: panva's `oidc-provider`
// (npm, OpenID-certified), with the client_credentials grant and resource
// indicators so it issues JWT access tokens for a chosen audience. The glue
// here only starts it on 127.0.0.1 and lets a test pick the token's `sub`,
// extra claims and lifetime, and rotate the signing key.
// Usage: node oidc_provider.mjs [port=0]  -> prints {"issuer":..,"kid":..}
//   POST /token (basic auth test:secret) grant_type=client_credentials
//        &resource=<aud>&x_sub=..&x_claims={json}&x_ttl=N
//   POST /admin/rotate[?keep_old=1]   a new signing key; the old one is
//        dropped from the JWKS unless keep_old=1
import http from "node:http";
import crypto from "node:crypto";
import Provider from "oidc-provider";

const port = Number(process.argv[2] ?? 0);
let issuer;
let handler;
let keys = [];

function newKey() {
  const jwk = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ format: "jwk" });
  return { ...jwk, kid: crypto.randomUUID(), alg: "RS256", use: "sig" };
}

function makeProvider(jwks) {
  const p = new Provider(issuer, {
    clients: [{ client_id: "test", client_secret: "secret", grant_types: ["client_credentials"],
                redirect_uris: [], response_types: [] }],
    jwks: { keys: jwks }, // the first key signs; all are published
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => "urn:test-api",
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource) => ({
          audience: resource, scope: "read write",
          accessTokenTTL: Number(ctx.oidc.body?.x_ttl ?? 3600),
          accessTokenFormat: "jwt",
        }),
      },
    },
    formats: {
      customizers: {
        jwt(ctx, token, jwt) {
          const b = ctx.oidc.body ?? {};
          if (b.x_sub) jwt.payload.sub = b.x_sub;
          if (b.x_claims) Object.assign(jwt.payload, JSON.parse(b.x_claims));
        },
      },
    },
  });
  p.on("server_error", (ctx, err) => console.error(err));
  return p;
}

const server = http.createServer((req, res) => {
  if (req.method === "POST" && req.url.startsWith("/admin/rotate")) {
    const keepOld = new URL(req.url, issuer).searchParams.get("keep_old") === "1";
    const old = keys[0].kid;
    keys = [newKey(), ...(keepOld ? [keys[0]] : [])];
    handler = makeProvider(keys).callback();
    res.setHeader("content-type", "application/json");
    return res.end(JSON.stringify({ kid: keys[0].kid, old_kid: old, kept_old: keepOld }));
  }
  handler(req, res);
});
server.listen(port, "127.0.0.1", () => {
  issuer = `http://127.0.0.1:${server.address().port}`;
  keys = [newKey()];
  handler = makeProvider(keys).callback();
  console.log(JSON.stringify({ issuer, kid: keys[0].kid }));
});
for (const s of ["SIGINT", "SIGTERM"]) process.on(s, () => process.exit(0));
