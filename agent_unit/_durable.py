"""Journaled model and tool calls for framework adapters: ``ctx.durable.model`` and ``ctx.durable.tools``.

Both sit on the run's one journal (:meth:`Run.journaled`, the same mechanism as ``run.step``):

- A model call is journaled by its *result*, keyed by its name and occurrence, with a short
  hash of the request. On replay the request is rebuilt by the framework and only its hash
  is compared, so a long conversation's journal grows with the answers, not with the
  history, and a different request is a clear error instead of a stale answer.
- A tool call is keyed by the framework's tool call id when it has one (its occurrence
  otherwise), emits the AG-UI tool events, and runs with that key as the idempotency key:
  ``use_run().idempotency_key()`` inside the tool is stable across re-runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic_core import to_jsonable_python

from ._codec import UNTYPED
from ._events import MODEL_FINISHED, MODEL_STARTED, custom
from .run import Run

__all__ = ["Durable", "request_hash", "tool_call_started"]


def request_hash(request: Any) -> str:
    """A short, stable digest of a request (canonical JSON)."""
    text = json.dumps(to_jsonable_python(request, fallback=repr), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def tool_call_started(call_id: str, tool: str, arguments: Any) -> tuple[dict[str, Any], ...]:
    """The AG-UI events that show a tool call before its result: ``TOOL_CALL_START``, ``ARGS``, ``END``."""
    return (
        {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": tool},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": json.dumps(arguments, default=str)},
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
    )


class Durable:
    def __init__(self, run: Run) -> None:
        self._run = run

    def model(
        self,
        fn: Callable[[Any], Awaitable[Any]],
        *,
        name: str = "model",
        response_type: Any = UNTYPED,
        usage: Callable[[Any], dict[str, Any] | None] | None = None,
    ) -> Callable[[Any], Awaitable[Any]]:
        """``fn(request) -> response``, journaled: it runs once per call; replays return the response.

        ``response_type`` rebuilds the response from JSON (a pydantic model or dataclass);
        ``usage(response)`` gives its token usage (``provider``, ``model``, ``inputTokens``...).
        A call that runs (not a replay) is framed by the CUSTOM events ``agent-unit.model-started``
        and ``agent-unit.model-finished`` (with its usage, or its error), so a timeline shows when
        it ran and what it spent. A call that would pass one of the run's limits is not made
        (:meth:`~agent_unit.run.Run.check_limits`).
        """
        run = self._run

        async def call(request: Any) -> Any:
            key = run.next_key("model", name)
            await run.check_limits(key)  # a call that would pass one of the run's limits is not made
            spent: list[dict[str, Any]] = []

            async def measured(request: Any) -> Any:
                response = await fn(request)
                found = usage(response) if usage is not None else None
                if found:
                    spent.append(found)
                return response

            def finished(error: dict[str, Any] | None) -> dict[str, Any]:
                value: dict[str, Any] = {"callId": key, "name": name}
                if error is not None:
                    value["error"] = error
                elif spent:
                    value["usage"] = spent[-1]
                return custom(MODEL_FINISHED, value)

            return await run.journaled(
                key,
                name,
                measured,
                (request,),
                response_type,
                what=f"the response of model call {key!r}",
                started=(custom(MODEL_STARTED, {"callId": key, "name": name}),),
                finished=finished,
                request_hash=request_hash(request),
                usage=usage,
            )

        return call

    async def value(self, name: str, fn: Callable[[], Any], *, type: Any = UNTYPED) -> Any:
        """``fn()`` once (a read of outside state, such as a conversation's history); replays return it.

        Unlike ``run.step`` it emits no step events: it is bookkeeping, not work to show.
        """
        return await self._run.journaled(
            self._run.next_key("value", name), name, fn, (), type, what=f"the value {name!r}"
        )

    def tools(self, tools: Mapping[str, Callable[..., Any]]) -> dict[str, Callable[..., Awaitable[Any]]]:
        """Each tool journaled: ``await tool(arguments, call_id=...)`` runs it once with its keyword arguments."""
        return {tool_name: self._tool(tool_name, fn) for tool_name, fn in tools.items()}

    def _tool(self, tool_name: str, fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
        run = self._run

        async def call(arguments: Mapping[str, Any] | None = None, *, call_id: str | None = None) -> Any:
            arguments = dict(arguments or {})
            key = f"tool:{tool_name}#{call_id}" if call_id else run.next_key("tool", tool_name)
            call_id = call_id or key
            return await run.journaled(
                key,
                tool_name,
                lambda: fn(**arguments),
                (),
                UNTYPED,
                what=f"the result of tool {tool_name!r}",
                request_hash=request_hash(arguments),
                # A call shown at its approval already adds only its result.
                started=() if call_id in run.shown_tool_calls else tool_call_started(call_id, tool_name, arguments),
                result_event=lambda text: {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": f"{call_id}:result",
                    "toolCallId": call_id,
                    "content": text,
                    "role": "tool",
                },
            )

        return call
