"""Tool approval, shared by the built-in adapters: one interrupt per call, one answer format.

A ``tool-approval`` interrupt carries ``{call_id, tool, arguments, agent}``; the answer is
``true``, ``false`` or ``{"approved": bool, "reason"?: str}``. Before the run parks, the call's
``TOOL_CALL_START``/``ARGS``/``END`` are stored, so a UI shows which call it approves (the
``toolCallId`` is the payload's ``call_id``); once approved, the call adds only its result.
With the deployment's ``approval_timeout``, an approval nobody answers in time is declined
(:data:`EXPIRED`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from typing_extensions import TypeAliasType

from .._durable import tool_call_started
from ..run import Run

__all__ = ["EXPIRED", "Approval", "ApprovalAnswer", "ask_approval"]


class Approval(BaseModel):
    """A human's answer to a ``tool-approval`` interrupt."""

    approved: bool
    reason: str | None = None


ApprovalAnswer = TypeAliasType("ApprovalAnswer", bool | Approval)
"""The answer's type, named so that the interrupt records it (a bare union has no name): a process
that resumes the run before it has run its agent (a Worker's fresh isolate) validates with it
instead of the stored JSON Schema, which would need jsonschema (not loadable on Pyodide)."""

EXPIRED = Approval(approved=False, reason="nobody answered by the deadline")
"""The answer of an approval that nobody answered within the deployment's ``approval_timeout``."""


async def ask_approval(
    run: Run, *, call_id: str, tool: str, arguments: Any, agent: str | None, show: bool = True
) -> Approval:
    """Park until a human approves or declines the call; a replay returns the journaled answer.

    ``show=False`` for a call whose tool events were emitted already (a tool that ran, then asked).
    """
    payload = {"call_id": call_id, "tool": tool, "arguments": arguments, "agent": agent}
    events = tool_call_started(call_id, tool, arguments) if show else ()
    if show:
        run.shown_tool_calls.add(call_id)
    # Keyed by the call id: parallel calls may reach their approvals in another order on replay.
    answer = await run.interrupt(
        "tool-approval",
        payload,
        answer=ApprovalAnswer,
        key=call_id,
        events=events,
        timeout=run.approval_timeout,
        default=EXPIRED,
    )
    return answer if isinstance(answer, Approval) else Approval(approved=bool(answer))
