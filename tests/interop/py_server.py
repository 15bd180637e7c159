"""Small MCP server written with the official Python SDK, for tests/mcp_interop.rs.

Requires the PyPI package pinned in requirements.txt (mcp 2.x, where FastMCP
is called MCPServer). Serves streamable HTTP at http://127.0.0.1:<port>/mcp.

Tools:
  add(a, b)            -> text result with the sum
  weather(city)        -> structured output (structuredContent + JSON text block)
  fail_tool(reason)    -> raises ToolError: result has isError true, message shown
  crash_tool()         -> raises ValueError: result has isError true, message hidden
  rpc_error(reason)    -> raises MCPError: the call fails with a JSON-RPC error
  register_visitor(site) -> asks the user (elicitation/create, form mode) for the
                          visitor's name and company, inside the open call;
                          registers them on accept
  issue_badge(site)    -> asks for the visitor through the SDK's own resolver
                          (`Resolve(...)` returning `Elicit`): mid-call on
                          2025-11-25, an InputRequiredResult with the SDK's
                          requestState on 2026-07-28; registers on accept
  visitor_count()      -> how many visitors were registered (exactly-once proof)
  inspect_site(site, fail) -> a long call (~1.5 s, three steps with a status
                          message each): a task (py_tasks.py, the tasks
                          extension) for a 2026-07-28 client that declared it,
                          an answer in the call otherwise; `fail` makes the
                          task fail with a JSON-RPC error
  task_counts()        -> {"runs", "gets", "cancels"}: inspections started,
                          tasks/get and tasks/cancel received

Usage: python3 py_server.py --port 8765
"""

import argparse
from typing import Annotated

from pydantic import BaseModel

from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

import asyncio

from py_tasks import COUNTS, TasksExtension, set_status_message

server = MCPServer(
    "turnstile-py-interop",
    version="1.0.0",
    extensions=[TasksExtension({"inspect_site"})],
)
INSPECTIONS = {"runs": 0}


class Weather(BaseModel):
    city: str
    temperature_c: float
    conditions: str


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Fixed weather report for a city, as structured output.")
def weather(city: str) -> Weather:
    return Weather(city=city, temperature_c=21.5, conditions="overcast")


@server.tool(description="Always fails inside the tool (isError result).")
def fail_tool(reason: str) -> str:
    raise ToolError(f"tool failed on purpose: {reason}")


@server.tool(description="Crashes with an unexpected exception (isError result, message hidden).")
def crash_tool() -> str:
    raise ValueError("internal detail that must not leak")


@server.tool(description="Always fails with a JSON-RPC error (-32602).")
def rpc_error(reason: str) -> str:
    raise MCPError(code=-32602, message=f"rejected on purpose: {reason}")


class Visitor(BaseModel):
    name: str
    company: str


VISITORS: list[dict] = []


@server.tool(description="Register a site visitor: asks the user for the visitor's name and company.")
async def register_visitor(site: str, ctx: Context) -> dict:
    result = await ctx.elicit(f"Who is visiting {site}?", schema=Visitor)
    if result.action == "accept":
        visitor = result.data.model_dump()
        VISITORS.append({"site": site, **visitor})
        return {"status": "REGISTERED", "site": site, "visitor": visitor, "registered": len(VISITORS)}
    return {"status": result.action.upper(), "site": site, "registered": len(VISITORS)}


def ask_badge(site: str) -> Elicit[Visitor]:
    return Elicit(f"Who needs a badge for {site}?", Visitor)


@server.tool(description="Issue a site badge: asks the user who the visitor is.")
async def issue_badge(
    site: str, visitor: Annotated[ElicitationResult[Visitor], Resolve(ask_badge)]
) -> dict:
    if visitor.action == "accept":
        data = visitor.data.model_dump()
        VISITORS.append({"site": site, **data})
        return {"status": "BADGED", "site": site, "visitor": data, "registered": len(VISITORS)}
    return {"status": visitor.action.upper(), "site": site, "registered": len(VISITORS)}


@server.tool(description="How many visitors were registered.")
def visitor_count() -> int:
    return len(VISITORS)


@server.tool(description="Inspect a site (takes a while): a task for a client that follows tasks.")
async def inspect_site(site: str, fail: bool = False) -> dict:
    INSPECTIONS["runs"] += 1
    for n, what in enumerate(["walking the floors", "checking the scaffolds", "writing up"], 1):
        set_status_message(f"{what} at {site} ({n}/3)")
        await asyncio.sleep(0.5)
    if fail:
        raise MCPError(code=-32603, message=f"the inspection of {site} could not be written up")
    return {"site": site, "status": "INSPECTED", "findings": 2}


@server.tool(description="How many inspections ran, and the tasks requests received.")
def task_counts() -> dict:
    return {"runs": INSPECTIONS["runs"], **COUNTS}


def export_traces_if_asked() -> None:
    """With OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, install an SDK tracer
    provider: the SDK's own middleware then reports a `tools/call <tool>`
    span per call, parented by the request's `_meta.traceparent` (the
    caller's trace). Exported as each span ends (tests/otel.rs)."""
    import os

    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if not endpoint:
        return
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    # Resource.create() reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
    provider = TracerProvider(resource=Resource.create())
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    trace.set_tracer_provider(provider)


def main() -> None:
    export_traces_if_asked()
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    server.run(transport="streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
