"""An MCP server on the official Python SDK with JSON-in-TEXT habits, for
tests/interop_honesty.rs.

Requires the PyPI package pinned in requirements.txt (mcp 2.x). Serves
streamable HTTP at http://127.0.0.1:<port>/mcp.

Habits (none of them turnstile's own):
  * no structuredContent at all: every answer is one text block;
  * a listing is a JSON object in that text block,
      {"photos": [...], "count": n, "total_count": N|null,
       "at_least": M|null, "more": bool, "next": "cursor"|null}
    items under `photos`, id field `photo_id`, and the accounting under
    these non-standard key names;
  * a SQL-style count: text {"columns": ["COUNT(*)"], "rows": [[613]]};
  * an in-band failure: `archive=true` answers the plain text
    "upstream error 502: Bad Gateway from the photo archive" with
    isError false;
  * a mutation, `add_photo`, so the total can drift between two turns.

The dataset (the same in ts_server.mjs and in the test's SQLite file):
photos on floors 1-8 (floor 9 has none), FLOOR_COUNTS per floor, id
`P{floor:02}-{i:04}` for i = 1..n, captured on 2026-01-01 plus
(i * 37 + floor * 11) % 365 days.

Tools:
  find_photos(floor?, date_from?, date_to?, photo_ids?, limit=10, cursor?, archive=false)
      ordered by photo_id; the total is exact up to COUNT_CAP matches, above
      that only `at_least: COUNT_CAP` is known; `next` is an opaque cursor
      bound to the search (stateless: it holds an offset).
  count_photos(floor?, date_from?, date_to?)   -> the SQL-style table above
  add_photo(floor, captured_at)                -> text "added <photo_id>" (no annotations)
  hold_seat / book / release / reservation_status / reservation_counts  (approval)
  post_notice(floor, text)                     -> declares destructiveHint: true
  prepare_report / issue_report_link / report_counts  (export, issue 18)

An export in this server's own words (a second terminal flow, beside the
demo's `/api/lms/exports/{jobId}/download?token=`):
  prepare_report(floor?)  -> {"status": "OK", "reportId": "R-1", "files": 3, "bytes": 12345}
  issue_report_link(reportId, mirror?)
      -> {"status": "OK", "data": {"reportId": "R-1",
          "link": "<origin>/reports/R-1/file?key=<token>", "expiresAt": "...Z"}}
      the link on this server's own origin (http://<host>:<port>), unless
      `mirror` names another origin to build it on (a server that answers a
      foreign link, for the test that it is never delivered);
  report_counts()         -> calls received by the two tools above;
  GET /reports/{reportId}/file?key=<token>  -> a small ZIP (application/zip);
      a wrong or missing key is 403, an unknown report 404, an expired link 410.

Usage: python3 py_text_server.py --port 8765
"""

import argparse
import base64
import datetime
import hashlib
import io
import json
import secrets
import time
import zipfile

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

FLOOR_COUNTS = {1: 240, 2: 613, 3: 651, 4: 198, 5: 87, 6: 45, 7: 24, 8: 3}
COUNT_CAP = 500
START = datetime.date(2026, 1, 1)


def make_photos():
    photos = []
    for floor, n in FLOOR_COUNTS.items():
        for i in range(1, n + 1):
            day = START + datetime.timedelta(days=(i * 37 + floor * 11) % 365)
            photos.append(
                {"photo_id": f"P{floor:02d}-{i:04d}", "floor": floor, "captured_at": day.isoformat()}
            )
    return photos


PHOTOS = make_photos()
ADDED = [0]

server = MCPServer("turnstile-py-text-interop", version="1.0.0")


def matching(floor, date_from, date_to, photo_ids=None):
    out = [
        p
        for p in PHOTOS
        if (floor is None or p["floor"] == floor)
        and (not date_from or p["captured_at"] >= date_from)
        and (not date_to or p["captured_at"] <= date_to)
        and (photo_ids is None or p["photo_id"] in photo_ids)
    ]
    return sorted(out, key=lambda p: p["photo_id"])


def search_key(floor, date_from, date_to, photo_ids):
    ids = ",".join(sorted(photo_ids)) if photo_ids is not None else ""
    raw = f"{floor}|{date_from}|{date_to}|{ids}"
    return hashlib.sha256(raw.encode()).hexdigest()[:12]


def encode_cursor(offset, key):
    return base64.urlsafe_b64encode(json.dumps({"o": offset, "k": key}).encode()).decode()


def decode_cursor(cursor, key):
    try:
        c = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        offset = int(c["o"])
    except Exception as e:  # noqa: BLE001 - any garbage is a bad cursor
        raise ToolError("invalid cursor") from e
    if c.get("k") != key:
        raise ToolError("the cursor belongs to another search")
    return offset


@server.tool(
    description=(
        "Find site photos, newest ids last. Filters: floor, capture date range "
        "(YYYY-MM-DD), photo_ids (only these photos). Pages of `limit`; pass `cursor` "
        "(the previous answer's `next`) for the next page. Answers a JSON text."
    ),
    structured_output=False,
)
def find_photos(
    floor: int | None = None,
    date_from: str | None = None,
    date_to: str | None = None,
    photo_ids: list[str] | None = None,
    limit: int = 10,
    cursor: str | None = None,
    archive: bool = False,
) -> str:
    if archive:
        # The upstream's failure relayed as if it were an answer.
        return "upstream error 502: Bad Gateway from the photo archive"
    if limit < 1 or limit > 100:
        raise ToolError("limit must be between 1 and 100")
    key = search_key(floor, date_from, date_to, photo_ids)
    offset = decode_cursor(cursor, key) if cursor else 0
    hits = matching(floor, date_from, date_to, photo_ids)
    page = hits[offset : offset + limit]
    more = offset + len(page) < len(hits)
    exact = len(hits) <= COUNT_CAP
    body = {
        "photos": page,
        "count": len(page),
        "total_count": len(hits) if exact else None,
        "at_least": None if exact else COUNT_CAP,
        "more": more,
        "next": encode_cursor(offset + len(page), key) if more else None,
    }
    return json.dumps(body)


@server.tool(
    description="Count site photos (floor, capture date range). Answers a one-cell SQL table as JSON text.",
    structured_output=False,
)
def count_photos(
    floor: int | None = None, date_from: str | None = None, date_to: str | None = None
) -> str:
    n = len(matching(floor, date_from, date_to))
    return json.dumps({"columns": ["COUNT(*)"], "rows": [[n]]})


@server.tool(description="Record a new photo on a floor.", structured_output=False)
def add_photo(floor: int, captured_at: str) -> str:
    ADDED[0] += 1
    # Sorts before the floor's other photos, so it shifts every page.
    photo_id = f"P{floor:02d}-0000-{ADDED[0]}"
    PHOTOS.append({"photo_id": photo_id, "floor": floor, "captured_at": captured_at})
    return f"added {photo_id}"


# Seat holds, for the approval flow (issue 17), with this server's own
# habits: a JSON text block (no structuredContent), the id under
# `reservation_id`, lower-case states, and counters a test reads back.
HOLDS = {}
COUNTS = {"book": 0, "release": 0}


@server.tool(description="Hold a seat at a time; it stays held until booked or released.", structured_output=False)
def hold_seat(seat: str, time: str) -> str:
    if not seat.isdigit():
        return json.dumps({"result": "no such seat", "reservation_id": 0})
    rid = len(HOLDS) + 1
    HOLDS[rid] = {"seat": seat, "time": time, "status": "held"}
    return json.dumps({"result": "held", "reservation_id": rid})


@server.tool(description="Book a held seat.", structured_output=False)
def book(reservation_id: int) -> str:
    COUNTS["book"] += 1
    hold = HOLDS.get(reservation_id)
    if hold is None or hold["status"] != "held":
        raise ToolError(f"reservation {reservation_id} is not held")
    hold["status"] = "done"
    return json.dumps({"status": "confirmed", "reservation_id": reservation_id})


@server.tool(description="Release a held seat.", structured_output=False)
def release(reservation_id: int) -> str:
    COUNTS["release"] += 1
    hold = HOLDS.get(reservation_id)
    if hold is None or hold["status"] not in ("held", "released"):
        raise ToolError(f"reservation {reservation_id} cannot be released")
    hold["status"] = "released"
    return json.dumps({"status": "released", "reservation_id": reservation_id})


@server.tool(description="How a reservation stands.", structured_output=False)
def reservation_status(reservation_id: int) -> str:
    hold = HOLDS.get(reservation_id)
    if hold is None:
        raise ToolError(f"no reservation {reservation_id}")
    return json.dumps({"status": hold["status"], "reservation_id": reservation_id})


@server.tool(description="Calls received by book, release and post_notice (for tests).", structured_output=False)
def reservation_counts() -> str:
    return json.dumps(COUNTS)


# A tool that acts at once, declared destructive in this SDK's own words:
# the call itself must wait for a human (issue 17, approval before call).
COUNTS["post_notice"] = 0
NOTICES = []


@server.tool(
    description="Post a notice to every worker on a floor. It cannot be taken back.",
    annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True),
    structured_output=False,
)
def post_notice(floor: int, text: str) -> str:
    COUNTS["post_notice"] += 1
    NOTICES.append({"floor": floor, "text": text})
    return json.dumps({"posted": len(NOTICES), "floor": floor})


# An export with a capability link (issue 18): a preview, then a confirm that
# answers a link on this server's own origin, served below.
ORIGIN = ["http://127.0.0.1"]
REPORTS = {}
REPORT_COUNTS = {"prepare_report": 0, "issue_report_link": 0}
LINK_TTL_SECS = 15 * 60
REPORT_FILES = ["summary.txt", "floors.csv", "notes.txt"]


def report_zip(report_id, floor):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("summary.txt", f"report {report_id}, floor {floor if floor is not None else 'all'}\n")
        z.writestr("floors.csv", "floor,photos\n" + "".join(f"{f},{n}\n" for f, n in FLOOR_COUNTS.items()))
        z.writestr("notes.txt", "synthetic test data\n")
    return buf.getvalue()


@server.tool(
    description=(
        "Prepare a photo report (optionally of one floor) and say what it holds. "
        "Nothing is issued yet: issue_report_link gives the download link."
    ),
    structured_output=False,
)
def prepare_report(floor: int | None = None) -> str:
    REPORT_COUNTS["prepare_report"] += 1
    report_id = f"R-{len(REPORTS) + 1}"
    body = report_zip(report_id, floor)
    REPORTS[report_id] = {"zip": body, "keys": {}}
    return json.dumps({"status": "OK", "reportId": report_id, "files": len(REPORT_FILES), "bytes": len(body)})


@server.tool(
    description="Issue a download link for a prepared report. The link works for 15 minutes.",
    structured_output=False,
)
def issue_report_link(reportId: str, mirror: str | None = None) -> str:  # noqa: N803 - the wire name
    REPORT_COUNTS["issue_report_link"] += 1
    if reportId not in REPORTS:
        raise ToolError(f"no report {reportId}")
    key = secrets.token_urlsafe(24)
    expires = time.time() + LINK_TTL_SECS
    REPORTS[reportId]["keys"][key] = expires
    origin = mirror or ORIGIN[0]
    at = datetime.datetime.fromtimestamp(expires, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    data = {"reportId": reportId, "link": f"{origin}/reports/{reportId}/file?key={key}", "expiresAt": at}
    return json.dumps({"status": "OK", "data": data})


@server.tool(description="Calls received by prepare_report and issue_report_link (for tests).", structured_output=False)
def report_counts() -> str:
    return json.dumps(REPORT_COUNTS)


@server.custom_route("/reports/{report_id}/file", methods=["GET"])
async def report_file(request: Request) -> Response:
    report = REPORTS.get(request.path_params["report_id"])
    if report is None:
        return PlainTextResponse("not found", status_code=404)
    expires = report["keys"].get(request.query_params.get("key", ""))
    if expires is None:
        return PlainTextResponse("forbidden", status_code=403)
    if expires <= time.time():
        return PlainTextResponse("gone", status_code=410)
    name = f"{request.path_params['report_id']}.zip"
    return Response(
        report["zip"],
        media_type="application/zip",
        headers={"content-disposition": f'attachment; filename="{name}"'},
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    ORIGIN[0] = f"http://{args.host}:{args.port}"
    server.run(transport="streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
