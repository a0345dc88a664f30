"""``POST /agents/{agent}/ag-ui``: an AG-UI client drives an agent directly, pause and resume included.

A run's stored events are AG-UI events already, so this route adds no second event model:
it reads the one stored stream (the same one ``GET /runs/{id}/events`` serves) and changes
only what AG-UI says differently. Each request is one AG-UI run with the client's ``runId``;
the durable run behind it spans as many requests as it has pauses, and is named in the
events' ``metadata["agent-unit"]``. agent-unit's own ends of a segment (``RUN_INTERRUPTED``,
``RUN_SLEEPING``, ``RUN_CANCELLED``) become the ``RUN_FINISHED`` outcomes AG-UI 1.0 defines,
so a client never sees an event it does not know. The mapping is spec/ag-ui.md.

An interrupt's id is ``<run id>:<interrupt key>``: a resume entry alone names the durable
run, so resuming needs nothing kept between requests, in the client or in this process,
and works after a restart.

``ag-ui-protocol`` validates the request; it is imported at the route's first request (its
import costs about 0.2 s), and the route answers 501 where it is not installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from .._agent import Agent
from .._events import MODEL_FINISHED, MODEL_STARTED, dumps, now_ms
from .._records import RunRecord, RunStatus, agui_usage
from ..errors import (
    AgentUnitError,
    AgUiUnavailable,
    InternalError,
    InterruptNotFound,
    InvalidArgument,
    InvalidInput,
    NotInterrupted,
    RunConflict,
    RunNotFound,
)
from .bodies import read_json
from .sse import KEEP_ALIVE_COMMENT, SSEResponse, message
from .stream import KeepAlive

if TYPE_CHECKING:
    from .gateway import Gateway

__all__ = ["app"]

log = logging.getLogger("agent_unit.http.agui")

PROTOCOL_VERSION = "1.0"  # the AG-UI version this route speaks, declared on RUN_STARTED
META = "agent-unit"  # our key in AG-UI metadata (open by key; "ag-ui" is the protocol's own)

# Events that open a lane and the event that closes it, with the field naming the lane. An
# AG-UI client refuses RUN_FINISHED while a lane is open and a second opener of an open lane,
# both of which a stored stream can hold: a crash recovery re-runs a step that had started,
# and asyncio.gather runs two steps of one name side by side.
_LANES = {
    "STEP_STARTED": ("STEP_FINISHED", "stepName"),
    "TEXT_MESSAGE_START": ("TEXT_MESSAGE_END", "messageId"),
    "TOOL_CALL_START": ("TOOL_CALL_END", "toolCallId"),
    "REASONING_START": ("REASONING_END", "messageId"),
    "REASONING_MESSAGE_START": ("REASONING_MESSAGE_END", "messageId"),
}
_CLOSERS = {closer: (opener, field) for opener, (closer, field) in _LANES.items()}
# The stored events that end a segment, and the run status each reports.
_ENDS = {
    "RUN_FINISHED": "completed",
    "RUN_ERROR": "failed",
    "RUN_INTERRUPTED": "interrupted",
    "RUN_SLEEPING": "sleeping",
    "RUN_CANCELLED": "cancelled",
}


def app(gateway: Gateway) -> ASGIApp:
    """The route's ASGI app (built once, at its first request)."""
    try:
        from ag_ui.core import EventType, RunAgentInput
    except ImportError:
        return _unavailable
    return _AgUi(gateway, RunAgentInput, frozenset(kind.value for kind in EventType))


async def _unavailable(scope: Scope, receive: Receive, send: Send) -> None:
    raise AgUiUnavailable("the AG-UI route needs the ag-ui-protocol package (>= 1.0): install it beside agent-unit")


def interrupt_id(run_id: str, key: str) -> str:
    """The AG-UI id of an interrupt: it names the durable run, so a resume needs nothing else."""
    return f"{run_id}:{key}"


class _AgUi:
    """The route: a RunAgentInput in, the stream of one AG-UI run out."""

    def __init__(self, gateway: Gateway, run_agent_input: Any, event_types: frozenset[str]) -> None:
        self.gateway = gateway
        self.engine = gateway.engine
        self.RunAgentInput = run_agent_input
        self.event_types = event_types

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.handle(Request(scope, receive))
        await response(scope, receive, send)

    async def handle(self, request: Request) -> SSEResponse:
        """Start a run, or continue the one a resume entry names; every refusal is raised before any event."""
        agent = request.path_params["agent"]
        try:
            run_input = self.read(await read_json(request, self.gateway.max_body_bytes))
        except AgentUnitError:
            # authorized before answered
            await self.gateway.authorize(request, "start", {"agent": agent, "thread_id": None})
            raise
        if run_input.resume:
            return await self.resume(request, agent, run_input)
        thread_id = run_input.thread_id or None
        # an unknown agent is authorized as if it existed: a refusal is the same for both
        await self.gateway.authorize(request, "start", {"agent": agent, "thread_id": thread_id})
        definition = self.engine.agent(agent)  # 404 if there is none, 503 if its file does not load
        # A buffered host (Lambda) freezes once it answers: the gateway runs it until it parks, ends or yields.
        record = await self.gateway.start(agent, agent_input(definition, run_input), thread_id=thread_id)
        return self.stream(record, run_input.run_id, after=0)

    def read(self, body: dict[str, Any]) -> Any:
        """``body`` as a RunAgentInput; 422 naming the first field that does not fit."""
        try:
            return self.RunAgentInput.model_validate(body)
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_context=False, include_input=False)
            details = [{"loc": list(error["loc"]), "msg": error["msg"]} for error in errors]
            where = ".".join(str(part) for part in errors[0]["loc"]) or "body"
            raise InvalidArgument(
                f"the body is not an AG-UI RunAgentInput: {where}: {errors[0]['msg']}", details=details
            ) from None

    async def resume(self, request: Request, agent: str, run_input: Any) -> SSEResponse:
        """Continue the durable run an interrupt id names: answer it (resolved) or cancel the run."""
        entry = run_input.resume[0]
        run_id, _, key = entry.interrupt_id.partition(":")
        action = "resume" if entry.status == "resolved" else "cancel"
        try:  # authorized first, whatever is wrong with the entry: a refusal says nothing of which runs exist
            record = await self.gateway.run(request, action, run_id)
        except RunNotFound:
            record = None
        if len(run_input.resume) != 1:
            count = len(run_input.resume)
            raise InvalidArgument(f"send one resume entry, not {count}: a run waits on one interrupt at a time")
        if not key:
            record = None
        if record is None or record.agent != agent:
            raise InterruptNotFound(
                f"agent {agent!r} has no interrupt {entry.interrupt_id!r}: answer the id a RUN_FINISHED "
                "interrupt outcome of this agent gave"
            )
        if run_input.thread_id != record.thread_id:
            raise RunConflict(
                f"interrupt {entry.interrupt_id!r} belongs to thread {record.thread_id!r}, not {run_input.thread_id!r}"
            )
        if record.status != RunStatus.interrupted or record.interrupt is None:
            raise NotInterrupted(
                f"run {record.id} is {record.status.value}, not interrupted: interrupt {entry.interrupt_id!r} "
                "has nothing left to answer"
            )
        if record.interrupt.key != key:
            current = interrupt_id(record.id, record.interrupt.key)
            raise RunConflict(
                f"run {record.id} waits on interrupt {current!r}, not {entry.interrupt_id!r}: answer that one"
            )
        after = await self.gateway.last_seq(record.id)
        # The key is checked again inside the engine's compare-and-set: an answer given for an
        # interrupt the run has meanwhile left (another tab answered it) is refused, never moved on.
        if entry.status == "resolved":  # InvalidAnswer (422) leaves it parked
            await self.gateway.resume(record.id, entry.payload, interrupt_key=key, request=request, record=record)
        else:
            await self.gateway.cancel(record.id, interrupt_key=key)
        return self.stream(record, run_input.run_id, after=after)

    def stream(self, record: RunRecord, agui_run_id: str, *, after: int) -> SSEResponse:
        """The run's events after ``after``, as one AG-UI run, until it parks or ends."""

        async def body(stop: asyncio.Event) -> AsyncIterator[bytes]:
            translate = Translator(
                record.id, record.thread_id, agui_run_id, self.event_types, usage=agui_usage(record.usage)
            )
            items = self.gateway.events(record.id, after=after, stop=stop)
            try:
                async with contextlib.aclosing(items):
                    async for item in items:
                        if isinstance(item, KeepAlive):
                            yield KEEP_ALIVE_COMMENT
                            continue
                        stored = json.loads(item.data)
                        usage = None
                        if stored.get("type") in _ENDS and "usage" not in stored:
                            # Saved with the event: the run's usage as it parked, failed or was cancelled.
                            now = await self.engine.find(record.id)
                            usage = agui_usage(now.usage) if now is not None else None
                        for event in translate(stored, usage):
                            yield message(dumps(event))
                        if translate.done:
                            return
            except Exception:
                log.exception("the AG-UI stream of run %s failed", record.id)
                failed = {
                    "type": "RUN_ERROR",
                    "message": "the event stream failed: read the run again",
                    "code": InternalError.code,
                }
                for event in translate(failed, None):
                    yield message(dumps(event))

        return SSEResponse(body, headers={"x-run-id": record.id, "x-stream-after": str(after)})


def agent_input(agent: Agent, run_input: Any) -> Any:
    """The agent's input: ``forwardedProps.input`` when given, else the last user message's text.

    The text goes as it is when the agent's input accepts a string, and parsed as JSON
    otherwise (an agent taking an object gets ``{"order_id": "o_1"}`` typed as a message).
    """
    props = run_input.forwarded_props
    if isinstance(props, dict) and "input" in props:
        return props["input"]
    text = _last_user_text(run_input.messages)
    if text is None:
        return None
    try:
        agent.validate_input(text)
        return text
    except InvalidInput:
        pass
    try:
        return json.loads(text)
    except ValueError:
        return text  # refused by the agent's own schema, with its message


def _last_user_text(messages: list[Any]) -> str | None:
    for entry in reversed(messages):
        if entry.role != "user":
            continue
        content = entry.content
        if isinstance(content, str):
            return content
        return "\n".join(part.text for part in content if getattr(part, "type", None) == "text")
    return None


class Translator:
    """Stored events in, the AG-UI events of one AG-UI run out; ``done`` after its end.

    ``usage`` is the durable run's token usage when this AG-UI run began: AG-UI counts each
    run's own model calls, and agent-unit's totals cover the whole durable run.
    """

    def __init__(
        self,
        run_id: str,
        thread_id: str,
        agui_run_id: str,
        event_types: frozenset[str],
        *,
        usage: list[dict[str, Any]] | None = None,
    ) -> None:
        self.run_id, self.thread_id, self.agui_run_id = run_id, thread_id, agui_run_id
        self.event_types = event_types
        self.usage_before = usage or []
        self.started = False
        self.done = False
        self._open: dict[tuple[str, Any], int] = {}  # (opener, id) -> how many are open

    def __call__(self, event: dict[str, Any], usage: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """The AG-UI events for one stored event; ``usage``: the run's total at an end that carries none."""
        kind = event.get("type", "")
        out: list[dict[str, Any]] = []
        if not self.started:
            # A stream always opens with RUN_STARTED; a cancel stores none, so one is made.
            self.started = True
            out.append(self._run_started(event.get("timestamp") if kind == "RUN_STARTED" else None))
            if kind == "RUN_STARTED":
                return out
        if kind in _LANES:
            lane = (kind, event.get(_LANES[kind][1]))
            self._open[lane] = self._open.get(lane, 0) + 1
            return out + ([event] if self._open[lane] == 1 else [])
        if kind in _CLOSERS:
            opener, field = _CLOSERS[kind]
            lane = (opener, event.get(field))
            count = self._open.pop(lane, 0)
            if count > 1:
                self._open[lane] = count - 1
            return out + ([event] if count == 1 else [])  # a closer of nothing open is refused by clients
        if kind in _ENDS:
            self.done = True
            return out + self._close_lanes() + [self._end(kind, event, event.get("usage", usage))]
        if kind == "RUN_STARTED" or kind not in self.event_types:
            return out  # not AG-UI (or a second start, which a stream that ends at its end never reads)
        if kind == "CUSTOM" and event.get("name") in (MODEL_STARTED, MODEL_FINISHED):
            return out  # the inbox's timeline bars: an AG-UI run reports its usage in RUN_FINISHED
        return [*out, event]

    def _meta(self, status: str | None = None, **extra: Any) -> dict[str, Any]:
        meta: dict[str, Any] = {"runId": self.run_id}
        if status is not None:
            meta["status"] = status
        return {META: {**meta, **extra}}

    def _run_started(self, timestamp: int | None) -> dict[str, Any]:
        return {
            "type": "RUN_STARTED",
            "threadId": self.thread_id,
            "runId": self.agui_run_id,
            "protocolVersion": PROTOCOL_VERSION,
            "timestamp": timestamp if timestamp is not None else now_ms(),
            "metadata": self._meta(),
        }

    def _close_lanes(self) -> list[dict[str, Any]]:
        stamp = now_ms()
        closing = [
            {"type": _LANES[opener][0], _LANES[opener][1]: ident, "timestamp": stamp}
            for opener, ident in reversed(list(self._open))
        ]
        self._open.clear()
        return closing

    def _end(self, kind: str, event: dict[str, Any], total: list[dict[str, Any]] | None) -> dict[str, Any]:
        status = _ENDS[kind]
        spent = usage_since(total or [], self.usage_before)
        if kind == "RUN_ERROR":
            failed = {key: value for key, value in event.items() if key != "usage"}
            return {**failed, **({"usage": spent} if spent else {}), "metadata": self._meta(status)}
        finished: dict[str, Any] = {
            "type": "RUN_FINISHED",
            "threadId": self.thread_id,
            "runId": self.agui_run_id,
            "timestamp": event.get("timestamp", now_ms()),
        }
        if event.get("result") is not None:
            finished["result"] = event["result"]
        if spent:
            finished["usage"] = spent
        if kind == "RUN_INTERRUPTED":
            finished["outcome"] = {"type": "interrupt", "interrupts": [self._interrupt(event["interrupt"])]}
        elif kind == "RUN_CANCELLED":
            finished["outcome"] = {"type": "cancelled"}
        else:  # completed, or sleeping: not an interrupt, as nothing is asked and the run wakes by itself
            finished["outcome"] = {"type": "success"}
        wake = {"wakeAt": event.get("wakeAt")} if kind == "RUN_SLEEPING" else {}
        finished["metadata"] = self._meta(status, **wake)
        return finished

    def _interrupt(self, interrupt: dict[str, Any]) -> dict[str, Any]:
        """AG-UI's Interrupt for ours; the payload rides in metadata (AG-UI's Interrupt has no field for it)."""
        payload = interrupt.get("payload")
        name = interrupt["name"]
        out: dict[str, Any] = {"id": interrupt_id(self.run_id, interrupt["key"]), "reason": name}
        if isinstance(payload, str):
            out["message"] = payload
        if name == "tool-approval" and isinstance(payload, dict) and isinstance(payload.get("call_id"), str):
            out["toolCallId"] = payload["call_id"]
        schema = interrupt.get("answerSchema")
        if isinstance(schema, dict):
            out["responseSchema"] = schema
        out["metadata"] = {META: {"runId": self.run_id, "key": interrupt["key"], "payload": payload}}
        return out


def usage_since(total: list[dict[str, Any]], before: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per provider and model, the counts in ``total`` beyond those in ``before``: what one AG-UI run spent."""
    earlier = {(entry.get("provider"), entry.get("model")): entry for entry in before}
    spent = []
    for entry in total:
        base = earlier.get((entry.get("provider"), entry.get("model")), {})
        counts = {
            key: value - base.get(key, 0)
            for key, value in entry.items()
            if key not in ("provider", "model") and isinstance(value, int)
        }
        if any(counts.values()):
            labels = {key: entry[key] for key in ("provider", "model") if entry.get(key) is not None}
            spent.append({**labels, **counts})
    return spent
