"""``POST /mcp``: every agent is an MCP tool, served by the official ``mcp`` SDK (2.x).

``tools/list`` lists the agents; ``tools/call`` starts a run and answers once it parks or
ends; a run that pauses for a human answers with its run id and the pending interrupt, and
the built-in ``resume_run`` tool answers it. The contract is ``spec/mcp.md``.

The SDK's low-level server and its streamable HTTP session manager run stateless and answer
with JSON. A new manager serves each request: its ``run()`` may be entered only once per
instance, and serverless hosts run the lifespan per invocation (a mounted app gets none), so
it is never started from a lifespan. The server itself holds only the handlers (no
connection state), so it is built once and shared. Stateless also means any process behind
a load balancer can answer any request: everything a client needs next is in the run id.
Only POST is routed: a stateless GET stream would never end.

The SDK takes about a second to import, so it is imported here, on the first request to
``/mcp``, and never when ``agent_unit`` is imported.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import TYPE_CHECKING, Any

from starlette.requests import ClientDisconnect, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._records import RunRecord, RunStatus
from ..errors import (
    AgentNotFound,
    AgentUnitError,
    ForbiddenOrigin,
    InternalError,
    InvalidArgument,
    InvalidInput,
    McpToolClash,
    McpUnavailable,
)
from .bodies import read_body, require_json
from .responses import JSONResponse

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext
    from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams, Tool

    from .._agent import Agent
    from .gateway import Gateway

__all__ = ["RESUME_TOOL", "app", "tool_input_schema"]

log = logging.getLogger("agent_unit.http.mcp")

RESUME_TOOL = "resume_run"
"""The built-in tool that answers a paused run; no agent may take its name."""

_INSTALL = 'pip install "agent-unit[mcp]"'
_ON_WORKERS = (
    "POST /mcp is not served on Cloudflare Workers: the MCP SDK (mcp 2.x) needs rpds-py (through "
    "jsonschema) and cryptography (through pyjwt[crypto]), which have no Pyodide wheels on PyPI, so the "
    "Worker does not carry it. Serve MCP from another preset (server, aws-lambda, vercel); A2A and AG-UI "
    "work on Workers"
)
"""Why ``/mcp`` answers 501 in a Worker (Pyodide reports ``sys.platform`` as ``emscripten``)."""

_RESUME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "run_id": {"type": "string", "description": "The run_id a paused tool call returned."},
        "answer": {"description": "The answer to the pending interrupt; it must fit the interrupt's answer_schema."},
        "interrupt": {
            "type": "string",
            "description": "The interrupt's key the paused result gave: the answer is refused if the run "
            "has moved on to another interrupt meanwhile.",
        },
    },
    "required": ["run_id", "answer"],
    "additionalProperties": False,
}

_PAUSE_HINT = f"If the run pauses for an answer, the result gives its run_id and what it waits for: call {RESUME_TOOL}."

_INSTRUCTIONS = (
    "Each tool runs one agent durably and returns once the run finishes or pauses. A paused run "
    f"returns its run_id and the interrupt it waits for (name, payload, answer_schema): call {RESUME_TOOL} "
    "with that run_id and an answer fitting the answer_schema to continue it."
)


def app(gateway: Gateway) -> ASGIApp:
    """The ``/mcp`` endpoint for the gateway's agents; a 501 answer when the SDK is missing."""
    try:
        from mcp.server.lowlevel import Server
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings
    except ImportError:
        if sys.platform == "emscripten":
            return _refuse(501, McpUnavailable.code, _ON_WORKERS)
        return _refuse(501, McpUnavailable.code, f"POST /mcp needs the MCP SDK: {_INSTALL}")
    installed = _installed_version()
    if installed is not None and not installed.startswith("2."):
        # 1.x registers handlers with decorators and has no stateless per-request era
        return _refuse(501, McpUnavailable.code, f"POST /mcp needs mcp 2.x, not {installed}: {_INSTALL}")

    from .. import __version__

    agents = dict(gateway.agents)
    if RESUME_TOOL in agents:
        # Renaming either would surprise: a client reading spec/mcp.md expects resume_run to
        # resume, and the agent's own name everywhere else. So the clash is refused, loudly.
        message = (
            f"an agent is named {RESUME_TOOL!r}, the name of the MCP tool that resumes paused runs: "
            "rename the agent, or leave MCP out with create_agent_unit(mcp=False)"
        )
        log.error("agent-unit: POST /mcp is refused: %s", message)
        return _refuse(500, McpToolClash.code, message)

    tools = _Tools(gateway, agents)
    server: Server[Any] = Server(
        gateway.name,
        version=__version__,
        instructions=_INSTRUCTIONS,
        on_list_tools=tools.list_tools,
        on_call_tool=tools.call_tool,
        # the 2026-07-28 transport checks Mcp-Param-* headers against a tool's schema: from here,
        # without calling tools/list once per call
        get_tool_input_schema=tools.input_schema,
    )
    # The SDK's DNS-rebinding protection is off: the gateway's is the one every route has. The
    # Host must be one of the deployment's names (421, ``gateway.hosts``: the public URL's,
    # ``allowed_hosts``, loopback names and addresses), and a browser page from a foreign
    # Origin is refused (403) against ``gateway.origins``: loopback, the public URL's origin and
    # ``allowed_origins``, never merely the Host's. Requests without an Origin (not a browser)
    # pass to the ``authorize`` hook, which guards /mcp like every other route.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            gateway.refuse_foreign_hosts(request)
            origin = request.headers.get("origin")
            if not gateway.origins.allows(origin):
                raise ForbiddenOrigin(
                    f"Origin {(origin or '')[:100]!r} may not call /mcp: a page must be served from this deployment's "
                    "URL, from loopback, or from an origin listed in allowed_origins"
                )
            await gateway.authorize(request, "mcp", {})  # HTTP 401/403, so a client's auth flow sees them
            # Before the SDK, which answers both with a bare text body: the same JSON errors as every route.
            require_json(request)
            # Read here, bounded, so a client that leaves mid-body is one quiet line, not the SDK's traceback.
            body = await read_body(request, gateway.max_body_bytes)
        except AgentUnitError as exc:
            await JSONResponse(exc.to_dict(), status_code=exc.status, headers=exc.headers())(scope, receive, send)
            return
        except ClientDisconnect:
            log.debug("agent-unit: the client left POST /mcp before sending its whole body")
            return
        replayed = False

        async def replay() -> Message:
            """The body read above, then the connection's own messages (a disconnect)."""
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        manager = StreamableHTTPSessionManager(
            server,
            json_response=True,
            stateless=True,
            security_settings=security,
            max_request_body_size=gateway.max_body_bytes,
        )
        async with manager.run():
            await manager.handle_request(scope, replay, send)

    return serve


def _installed_version() -> str | None:
    """The installed SDK's version; None where its metadata was left out (a vendored copy)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mcp")
    except PackageNotFoundError:
        return None


def _refuse(status: int, code: str, message: str) -> ASGIApp:
    response = JSONResponse({"error": {"code": code, "message": message}}, status_code=status)

    async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
        await response(scope, receive, send)

    return refuse


def tool_input_schema(schema: dict[str, Any], *, required: bool = True) -> tuple[dict[str, Any], bool]:
    """The agent's input schema as an MCP tool's (which must be an object), and whether it was wrapped.

    An object schema is used as it is; any other is wrapped as ``{"input": <schema>}``, with
    its ``$defs`` moved to the root so that its ``#/$defs/...`` references still resolve.
    """
    if schema.get("type") == "object":
        return schema, False
    inner = dict(schema)
    defs = inner.pop("$defs", None)
    wrapped: dict[str, Any] = {"type": "object", "properties": {"input": inner}, "additionalProperties": False}
    if required:
        wrapped["required"] = ["input"]
    if defs:
        wrapped["$defs"] = defs
    return wrapped, True


class _Tools:
    """The tools: one per agent, and ``resume_run``. Built once, as the agents are fixed."""

    def __init__(self, gateway: Gateway, agents: dict[str, Agent]) -> None:
        from mcp.types import Tool

        self._gateway = gateway
        self._schemas: dict[str, dict[str, Any]] = {}
        self._wrapped: set[str] = set()
        tools: list[Tool] = []
        for name, agent in sorted(agents.items()):
            schema, wrapped = tool_input_schema(agent.input_schema, required=not _accepts_none(agent))
            if wrapped:
                self._wrapped.add(name)
            self._schemas[name] = schema
            description = f"{agent.description.strip() or f'Runs the agent {name}.'}\n\n{_PAUSE_HINT}"
            tools.append(Tool(name=name, description=description, input_schema=schema))
        self._schemas[RESUME_TOOL] = _RESUME_SCHEMA
        tools.append(
            Tool(
                name=RESUME_TOOL,
                description=(
                    "Answers a paused run's pending interrupt and continues it; returns like the agent's own "
                    "tool: its output once it finishes, or the next interrupt if it pauses again."
                ),
                input_schema=_RESUME_SCHEMA,
            )
        )
        self._tools = tools

    def input_schema(self, name: str) -> dict[str, Any] | None:
        return self._schemas.get(name)

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        from mcp.types import ListToolsResult

        return ListToolsResult(tools=self._tools)

    async def call_tool(self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        """Every failure is a tool error (``isError``), so the model sees it and can correct itself."""
        try:
            if not isinstance(ctx.request, Request):
                raise RuntimeError("an MCP call reached agent-unit without its HTTP request")
            arguments = params.arguments or {}
            if params.name == RESUME_TOOL:
                record = await self._resume(ctx.request, arguments)
            else:
                record = await self._start(ctx.request, params.name, arguments)
            return _run_result(record)
        except AgentUnitError as exc:
            return _error_result(exc.code, exc.message, exc.details)
        except Exception as exc:  # a tool error, never a stack trace, reaches the client
            log.exception("agent-unit: unexpected error in MCP tool %r", params.name, exc_info=exc)
            return _error_result(InternalError.code, "internal error: the server logged the details")

    async def _start(self, request: Request, name: str, arguments: dict[str, Any]) -> RunRecord:
        # the REST route's action, before anything is checked: an unknown tool is authorized as
        # if it existed, so a refusal is the same for both
        await self._gateway.authorize(request, "start", {"agent": name, "thread_id": None})
        if name not in self._schemas:
            raise AgentNotFound(f"no tool named {name!r}: tools/list lists them")
        if name in self._wrapped:
            unknown = sorted(set(arguments) - {"input"})
            if unknown:
                raise InvalidInput(f"unknown argument(s) {', '.join(unknown)}: send {{'input': ...}}")
            value: Any = arguments.get("input")
        else:
            value = arguments
        return await self._gateway.start(name, value, wait=True)

    async def _resume(self, request: Request, arguments: dict[str, Any]) -> RunRecord:
        run_id = arguments.get("run_id")
        usage = f"send {{'run_id': ..., 'answer': ...}} to {RESUME_TOOL}"
        if not isinstance(run_id, str):
            await self._gateway.authorize(request, "resume", {})  # authorized before answered, as every error is
            raise InvalidArgument(usage)
        record = await self._gateway.run(request, "resume", run_id)  # the REST route's action: one policy
        unknown = sorted(set(arguments) - {"run_id", "answer", "interrupt"})
        if unknown or "answer" not in arguments:
            raise InvalidArgument(usage)
        key = arguments.get("interrupt")
        return await self._gateway.resume(
            record.id, arguments["answer"], wait=True, interrupt_key=key, request=request, record=record
        )


def _accepts_none(agent: Agent) -> bool:
    """Whether the agent takes no input at all, so a wrapped ``input`` may be left out."""
    try:
        agent.validate_input(None)
    except Exception:  # noqa: BLE001 - any refusal means the input is needed
        return False
    return True


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _result(text: str, structured: dict[str, Any] | None, record: RunRecord, *, error: bool = False) -> CallToolResult:
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(
        content=[TextContent(text=text)],
        structured_content=structured,
        is_error=error,
        # the run behind every answer, for clients that link to it (GET /runs/{id})
        _meta={"agent-unit/run_id": record.id, "agent-unit/status": record.status.value},
    )


def _run_result(record: RunRecord) -> CallToolResult:
    """A run that parked or ended, as a tool result."""
    status = record.status
    if status == RunStatus.completed:
        output = record.output
        return _result(_text(output), output if isinstance(output, dict) else None, record)
    if status == RunStatus.interrupted and record.interrupt is not None:
        interrupt = record.interrupt
        pending = {
            "name": interrupt.name,
            "key": interrupt.key,
            "payload": interrupt.payload,
            "answer_schema": interrupt.answer_schema,
        }
        text = (
            f"Run {record.id} is paused: it waits for an answer to {interrupt.name!r}.\n"
            f"payload: {_text(interrupt.payload)}\n"
            f"answer_schema: {json.dumps(interrupt.answer_schema)}\n"
            f'To continue it, call {RESUME_TOOL} with {{"run_id": "{record.id}", "answer": <an answer fitting '
            "answer_schema>}."
        )
        return _result(text, {"run_id": record.id, "status": status.value, "interrupt": pending}, record)
    if status == RunStatus.failed:
        message = record.error.message if record.error is not None else "the run failed"
        error = record.error.model_dump(mode="json") if record.error is not None else None
        text = f"Run {record.id} failed: {message}"
        return _result(text, {"run_id": record.id, "status": status.value, "error": error}, record, error=True)
    if status == RunStatus.cancelled:
        text = f"Run {record.id} was cancelled."
        return _result(text, {"run_id": record.id, "status": status.value}, record, error=True)
    if status == RunStatus.sleeping:
        wake_at = record.wake_at.isoformat() if record.wake_at is not None else None
        text = f"Run {record.id} is sleeping until {wake_at}; it continues by itself."
        return _result(text, {"run_id": record.id, "status": status.value, "wake_at": wake_at}, record)
    # queued or running: its execution went on elsewhere (a budget handed it to the host)
    text = f"Run {record.id} is still {status.value}; it continues by itself."
    return _result(text, {"run_id": record.id, "status": status.value}, record)


def _error_result(code: str, message: str, details: Any = None) -> CallToolResult:
    from mcp.types import CallToolResult, TextContent

    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return CallToolResult(
        content=[TextContent(text=f"{code}: {message}")], structured_content={"error": error}, is_error=True
    )
