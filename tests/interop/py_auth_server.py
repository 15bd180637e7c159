"""An MCP server that authorizes each request, written with the official
Python SDK (mcp 2.x) and its auth support, for tests/connections.rs.

It is a resource server only: the authorization server is another process
(tests/interop/oidc_as.mjs, panva's oidc-provider). It publishes its
protected resource metadata (RFC 9728) and answers 401 with it; each bearer
token is checked by the authorization server's introspection endpoint
(RFC 7662), so a token revoked there is refused here at once. The token
must be for this server (`aud`, RFC 8707) with the `notes:read` scope.

Tools (each answers for the token's subject):
  list_notes()   -> the subject's notes
  add_note(text) -> adds one; it needs the `notes:write` scope too: a call
                    with a token without it gets 403 insufficient_scope
                    naming both scopes (the step-up, MCP authorization)
  note_calls()   -> how many times list_notes ran for each subject

With --calls-file F, each list_notes run also writes those counts to F as
JSON (the test's exactly-once proof, read without a token).

Usage: python3 py_auth_server.py --port P --issuer URL [--calls-file F] [--resource URL]
"""

import argparse
import json
from collections import Counter

import httpx2 as httpx

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

CALLS: Counter = Counter()
NOTES = {
    "ana": ["Budget review moved to Friday", "Ship the connector"],
    "ben": ["Dentist at 9"],
}


class IntrospectionVerifier:
    """Asks the authorization server whether a token is active."""

    def __init__(self, endpoint: str, resource: str):
        self.endpoint = endpoint
        self.resource = resource

    async def verify_token(self, token: str) -> AccessToken | None:
        async with httpx.AsyncClient(timeout=5) as client:
            r = await client.post(
                self.endpoint,
                data={"token": token},
                auth=("notes-rs", "rs-secret"),
            )
        if r.status_code != 200:
            return None
        info = r.json()
        if not info.get("active"):
            return None
        aud = info.get("aud")
        auds = aud if isinstance(aud, list) else [aud]
        if self.resource not in auds:
            return None
        return AccessToken(
            token=token,
            client_id=info.get("client_id", ""),
            scopes=(info.get("scope") or "").split(),
            expires_at=info.get("exp"),
            resource=self.resource,
            subject=info.get("sub"),
        )


def build(port: int, issuer: str, calls_file: str | None = None, resource: str | None = None) -> MCPServer:
    resource = resource or f"http://127.0.0.1:{port}/mcp"
    server = MCPServer(
        "turnstile-py-notes",
        version="1.0.0",
        token_verifier=IntrospectionVerifier(f"{issuer}/token/introspection", resource),
        auth=AuthSettings(
            issuer_url=issuer,
            resource_server_url=resource,
            required_scopes=["notes:read"],
            validate_token_resource=True,
        ),
    )

    @server.tool(description="The signed-in user's notes.")
    def list_notes() -> list[str]:
        sub = get_access_token().subject
        CALLS[sub] += 1
        if calls_file:
            with open(calls_file, "w") as f:
                json.dump(dict(CALLS), f)
        return NOTES.get(sub, [])

    @server.tool(description="Add a note for the signed-in user.")
    def add_note(text: str) -> str:
        sub = get_access_token().subject
        NOTES.setdefault(sub, []).append(text)
        return f"added; {len(NOTES[sub])} notes"

    @server.tool(description="How many times list_notes ran, per user.")
    def note_calls() -> dict[str, int]:
        return dict(CALLS)

    return server


class StepUp:
    """ASGI middleware: a `tools/call` of `add_note` whose token lacks
    `notes:write` is answered 403 with `error="insufficient_scope"` and the
    scopes it needs, as the MCP authorization spec's step-up says."""

    def __init__(self, app, verifier: IntrospectionVerifier, metadata_url: str):
        self.app = app
        self.verifier = verifier
        self.metadata_url = metadata_url

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            request = json.loads(body)
        except ValueError:
            request = {}
        wants_write = isinstance(request, dict) and request.get("method") == "tools/call" and \
            (request.get("params") or {}).get("name") == "add_note"
        if wants_write:
            auth = dict(scope["headers"]).get(b"authorization", b"").decode()
            token = auth[7:] if auth.startswith("Bearer ") else ""
            info = await self.verifier.verify_token(token) if token else None
            if info is not None and "notes:write" not in info.scopes:
                header = (f'Bearer error="insufficient_scope", scope="notes:read notes:write", '
                          f'resource_metadata="{self.metadata_url}"')
                payload = b'{"error": "insufficient_scope"}'
                await send({"type": "http.response.start", "status": 403,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", header.encode())]})
                return await send({"type": "http.response.body", "body": payload})
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--issuer", required=True)
    ap.add_argument("--calls-file")
    # A resource server that names another resource than itself (a hostile
    # or misconfigured one): its metadata points at that other origin.
    ap.add_argument("--resource")
    args = ap.parse_args()
    server = build(args.port, args.issuer, args.calls_file, args.resource)
    resource = args.resource or f"http://127.0.0.1:{args.port}/mcp"
    verifier = IntrospectionVerifier(f"{args.issuer}/token/introspection", resource)
    metadata = f"http://127.0.0.1:{args.port}/.well-known/oauth-protected-resource/mcp"
    app = StepUp(server.streamable_http_app(host="127.0.0.1"), verifier, metadata)
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
