"""A tiny MCP server over streamable HTTP (2025-11-25), for tests/mcp_reconnect.rs.

No dependencies: the standard library's HTTP server speaking the transport by
hand, so that it runs in a plain `cargo test` and can be killed (SIGKILL) and
started again as a real process. A new process knows none of the sessions of
the one before it, and answers a request that names one with HTTP 404, as the
transport requires of a server that terminated a session.

One tool, `reserve_seat`: not read-only (no `readOnlyHint`), so nothing may run
it twice. Every `tools/call` that reaches the tool appends one line
"<pid> <session>" to --log *before* it is answered, so the test counts on the
server's side how often it ran, across restarts.

  --delay-ms N   answer a call as an SSE stream: first an event with an id and
                 no data (so the client can resume the stream with
                 Last-Event-ID), then, N ms later, the result

Usage: python3 restartable_http_server.py --port 8123 --log /tmp/calls.log
"""

import argparse
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SESSIONS = set()
LOCK = threading.Lock()
ARGS = None
EVENTS = [0]

TOOL = {
    "name": "reserve_seat",
    "description": "Reserves a seat (a side effect: it must run at most once per call).",
    "inputSchema": {
        "type": "object",
        "properties": {"seat": {"type": "string"}},
    },
    "annotations": {"readOnlyHint": False, "destructiveHint": False},
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_):
        pass  # the test reads --log, not our access log

    def json_reply(self, status, body, session=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if session:
            self.send_header("Mcp-Session-Id", session)
        self.end_headers()
        self.wfile.write(data)

    def empty(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def known_session(self):
        session = self.headers.get("Mcp-Session-Id")
        with LOCK:
            return session, session in SESSIONS

    def do_GET(self):
        # No standalone stream; a GET for a session this process never
        # issued (a resumption after a restart) is 404, like any request.
        _, known = self.known_session()
        self.empty(405 if known else 404)

    def do_DELETE(self):
        session, known = self.known_session()
        if known:
            with LOCK:
                SESSIONS.discard(session)
        self.empty(200 if known else 404)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        msg = json.loads(self.rfile.read(length) or b"{}")
        method, mid = msg.get("method"), msg.get("id")
        if method == "initialize":
            session = uuid.uuid4().hex
            with LOCK:
                SESSIONS.add(session)
            version = msg.get("params", {}).get("protocolVersion", "2025-11-25")
            return self.json_reply(200, {"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "restartable", "version": "1.0.0"},
            }}, session)
        session, known = self.known_session()
        if not session:
            return self.json_reply(400, {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32000, "message": "Bad Request: no session id"}})
        if not known:
            # The transport's rule: a terminated (here: never issued)
            # session is answered 404, and the request is not processed.
            return self.json_reply(404, {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32001, "message": "Session not found"}})
        if mid is None:
            return self.empty(202)  # a notification
        if method == "ping":
            return self.json_reply(200, {"jsonrpc": "2.0", "id": mid, "result": {}})
        if method == "tools/list":
            return self.json_reply(200, {"jsonrpc": "2.0", "id": mid, "result": {"tools": [TOOL]}})
        if method == "tools/call":
            with LOCK, open(ARGS.log, "a", encoding="utf-8") as log:
                log.write(f"{os.getpid()} {session}\n")
            result = {"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": f"reserved by process {os.getpid()}"}],
                "isError": False,
            }}
            if not ARGS.delay_ms:
                return self.json_reply(200, result)
            with LOCK:
                EVENTS[0] += 1
                event = f"{os.getpid()}-{EVENTS[0]}"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(f"id: {event}-0\nretry: 100\ndata: \n\n".encode())
            self.wfile.flush()
            time.sleep(ARGS.delay_ms / 1000)
            self.wfile.write(f"id: {event}-1\nevent: message\ndata: {json.dumps(result)}\n\n".encode())
            self.wfile.flush()
            self.close_connection = True
            return None
        return self.json_reply(200, {"jsonrpc": "2.0", "id": mid, "error": {
            "code": -32601, "message": f"method not found: {method}"}})


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--delay-ms", type=int, default=0)
    ARGS = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    server.daemon_threads = True
    print("listening", flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
