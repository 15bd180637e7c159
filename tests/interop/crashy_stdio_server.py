"""A tiny MCP server over stdio that crashes on purpose, for tests/mcp_reconnect.rs.

No dependencies: newline-delimited JSON-RPC on stdin/stdout, as the MCP stdio
transport speaks it. One tool, `count`, answers "call N of process P".

Every `tools/call` that reaches the tool appends one line to --log, so the
test can count calls across restarts.

  --exit-after N   answer the Nth call of this process, then exit (status 3)
  --die-on N       exit on receiving the Nth call, before answering it (a crash
                   mid-call: the call ran, its answer is lost)

Usage: python3 crashy_stdio_server.py --log /tmp/calls.log --exit-after 2
"""

import argparse
import json
import os
import sys
import time


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", required=True)
    parser.add_argument("--exit-after", type=int, default=0)
    parser.add_argument("--die-on", type=int, default=0)
    args = parser.parse_args()

    calls = 0
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        method = msg.get("method")
        mid = msg.get("id")
        if mid is None:
            continue  # a notification (initialized, cancelled)
        if method == "initialize":
            version = msg.get("params", {}).get("protocolVersion", "2025-11-25")
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "crashy", "version": "1.0.0"},
            }})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [{
                "name": "count",
                "description": "Counts calls; the process exits after a few.",
                "inputSchema": {"type": "object", "properties": {}},
            }]}})
        elif method == "tools/call":
            calls += 1
            with open(args.log, "a", encoding="utf-8") as log:
                log.write(f"{os.getpid()} {calls}\n")
            if args.die_on and calls >= args.die_on:
                os._exit(4)
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": f"call {calls} of process {os.getpid()}"}],
                "isError": False,
            }})
            if args.exit_after and calls >= args.exit_after:
                time.sleep(0.3)  # the answer is read before the pipe closes
                os._exit(3)
        else:
            send({"jsonrpc": "2.0", "id": mid,
                  "error": {"code": -32601, "message": f"method not found: {method}"}})


if __name__ == "__main__":
    main()
