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
set -eu
bin="$1"
url="$2"
rev="${TURNSTILE_MCP_PROTOCOL:-2025-11-25}"
case "${MCP_CONFORMANCE_SCENARIO:-}" in
  tools_call) exec "$bin" mcp --protocol "$rev" "$url" add_numbers '{"a":2,"b":3}' ;;
  sse-retry) exec "$bin" mcp --protocol "$rev" "$url" test_reconnection ;;
  elicitation-sep1034-client-defaults) exec "$bin" mcp --protocol "$rev" "$url" test_client_elicitation_defaults ;;
  *) exec "$bin" mcp --protocol "$rev" "$url" ;;
esac
