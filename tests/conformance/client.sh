#!/bin/sh
# The client the MCP conformance suite drives in its client scenarios:
# turnstile's own ToolClient, through `turnstile mcp`.
#
#   conformance client --scenario S --command "sh tests/conformance/client.sh TURNSTILE_BIN"
#
# The suite appends its test server's URL and names the scenario in
# MCP_CONFORMANCE_SCENARIO. Each scenario's server expects one tool call (or
# none); this picks it, as the SDKs' "everything" clients do.
#
# TURNSTILE_MCP_PROTOCOL (default 2025-11-25) is the revision `turnstile mcp`
# speaks: the 2026-07-28 scenarios set it.
#
# The auth scenarios' authorization servers ask no user: --oauth-fetch
# follows the authorization URL. A scenario that pre-registers a client
# names it in MCP_CONFORMANCE_CONTEXT ({"client_id", "client_secret"});
# the CIMD scenario expects the suite's own metadata document URL as the
# client id.
set -eu
bin="$1"
url="$2"
rev="${TURNSTILE_MCP_PROTOCOL:-2025-11-25}"
context_field() {
  printf '%s' "${MCP_CONFORMANCE_CONTEXT:-}" | "${NODE:-node}" -e '
    let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
      try { const v = JSON.parse(s)[process.argv[1]]; if (typeof v === "string") process.stdout.write(v); } catch {}
    });' "$1"
}
set -- --oauth-fetch --client-metadata-url https://conformance-test.local/client-metadata.json
client_id=$(context_field client_id)
if [ -n "$client_id" ]; then
  TURNSTILE_MCP_CLIENT_SECRET=$(context_field client_secret)
  export TURNSTILE_MCP_CLIENT_SECRET
  set -- "$@" --client-id "$client_id" --client-secret-env TURNSTILE_MCP_CLIENT_SECRET
fi
case "${MCP_CONFORMANCE_SCENARIO:-}" in
  auth/client-credentials-basic) set -- "$@" --client-credentials ;;
esac
case "${MCP_CONFORMANCE_SCENARIO:-}" in
  tools_call) exec "$bin" mcp --protocol "$rev" "$@" "$url" add_numbers '{"a":2,"b":3}' ;;
  sse-retry) exec "$bin" mcp --protocol "$rev" "$@" "$url" test_reconnection ;;
  elicitation-sep1034-client-defaults) exec "$bin" mcp --protocol "$rev" "$@" "$url" test_client_elicitation_defaults ;;
  # The auth scenarios' servers offer `test-tool`; a call of it is where a
  # scope step-up (a 403 with insufficient_scope) is met.
  auth/scope-step-up|auth/scope-retry-limit) exec "$bin" mcp --protocol "$rev" "$@" "$url" test-tool '{}' ;;
  *) exec "$bin" mcp --protocol "$rev" "$@" "$url" ;;
esac
