"""The MCP tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) on the
official Python SDK's MCPServer, for tests/interop_honesty/tasks.rs.

mcp 2.3.0 ships no tasks runtime: its 2025-11-25 task types are "types-only,
never dispatched". This adds the 2026-07-28 extension through the SDK's own
Extension API (SEP-2133): `intercept_tool_call` answers a task tool's call
with a flat CreateTaskResult (`resultType: "task"`) when the request declared
the extension in its `_meta` client capabilities, and `tasks/get` /
`tasks/cancel` are method bindings. On 2025-11-25 the SDK only lets a
CallToolResult through `tools/call`, so a task tool answers in the call.

The SDK's habits stay its own: its result models dumped by alias (the
inlined result carries its own `resultType`), its JSON-RPC error objects, its
stateless 2026-07-28 request handling. What this file adds is written from
the extension's text, not from turnstile's client.
"""

import asyncio
import contextvars
import uuid
from datetime import datetime, timezone
from typing import Any

from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp_types import RequestParams

TASKS = "io.modelcontextprotocol/tasks"
POLL_INTERVAL_MS = 300
_tasks: dict[str, dict[str, Any]] = {}
_running: dict[str, asyncio.Task] = {}
_current = contextvars.ContextVar[str | None]("task_id", default=None)
COUNTS = {"gets": 0, "cancels": 0}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def set_status_message(msg: str) -> None:
    """From inside a task tool: the running task's statusMessage."""
    if (tid := _current.get()) and tid in _tasks:
        _tasks[tid].update(statusMessage=msg, lastUpdatedAt=_now())


def _declared(ctx) -> bool:
    if ctx.protocol_version != "2026-07-28":
        return False
    caps = ctx.session.client_capabilities
    return bool(caps and caps.extensions and TASKS in caps.extensions)


def _gate(ctx) -> None:
    if not _declared(ctx):
        raise MCPError(
            code=-32021,
            message=f"Client did not declare required extension {TASKS!r}",
            data={"requiredCapabilities": {"extensions": {TASKS: {}}}},
        )


def _task_fields(t: dict[str, Any]) -> dict[str, Any]:
    keys = ("taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs")
    return {k: t[k] for k in keys if t.get(k) is not None}


class TaskIdParams(RequestParams):
    task_id: str


class TasksExtension(Extension):
    identifier = TASKS

    def __init__(self, task_tools: set[str]):
        self.task_tools = task_tools

    async def intercept_tool_call(self, params, ctx, call_next):
        if params.name not in self.task_tools or not _declared(ctx):
            return await call_next(ctx)
        tid = str(uuid.uuid4())
        now = _now()
        _tasks[tid] = {
            "taskId": tid,
            "status": "working",
            "statusMessage": "queued",
            "createdAt": now,
            "lastUpdatedAt": now,
            "ttlMs": 600_000,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }

        async def run() -> None:
            _current.set(tid)
            t = _tasks[tid]
            try:
                res = await call_next(ctx)
                t.update(status="completed", result=res.model_dump(by_alias=True, mode="json", exclude_none=True))
            except asyncio.CancelledError:
                t["status"] = "cancelled"
            except MCPError as e:
                t.update(status="failed", error={"code": e.error.code, "message": e.error.message})
            except Exception as e:  # noqa: BLE001
                t.update(status="failed", error={"code": -32603, "message": str(e)})
            t["lastUpdatedAt"] = _now()

        _running[tid] = asyncio.get_running_loop().create_task(run())
        return {"resultType": "task", **_task_fields(_tasks[tid])}

    def methods(self):
        versions = frozenset({"2026-07-28"})
        return [
            MethodBinding("tasks/get", TaskIdParams, self._get, versions),
            MethodBinding("tasks/cancel", TaskIdParams, self._cancel, versions),
        ]

    async def _get(self, ctx, params: TaskIdParams):
        _gate(ctx)
        COUNTS["gets"] += 1
        t = _tasks.get(params.task_id)
        if t is None:
            raise MCPError(code=-32602, message=f"Unknown taskId {params.task_id}")
        out = {"resultType": "complete", **_task_fields(t)}
        for k in ("result", "error", "inputRequests"):
            if k in t:
                out[k] = t[k]
        return out

    async def _cancel(self, ctx, params: TaskIdParams):
        _gate(ctx)
        COUNTS["cancels"] += 1
        if params.task_id not in _tasks:
            raise MCPError(code=-32602, message=f"Unknown taskId {params.task_id}")
        if (job := _running.get(params.task_id)) and not job.done():
            job.cancel()
        return {"resultType": "complete"}
