"""The events a run emits, as AG-UI shapes (camelCase JSON), and the buffer that batches them.

Events are built as plain dicts on purpose: the ``ag-ui-protocol`` models take ~0.2 s to
import, too much for a Lambda or Worker cold start, so the runtime writes the same JSON and
the test suite checks every kind against the package's own models.

Nothing is written per event: events wait in :class:`EventBuffer` and ride along with the
next journal write (a step's entry, a park, the run's end) or a flush at most
``delta_batch_ms`` later. Consecutive text and tool-argument deltas within that window are
merged into one stored event.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ._jsontext import scrub

__all__ = ["MODEL_FINISHED", "MODEL_STARTED", "EventBuffer", "dumps", "step_text"]

MODEL_STARTED = "agent-unit.model-started"
MODEL_FINISHED = "agent-unit.model-finished"
"""The CUSTOM events around a model call that ran (``ctx.durable.model``): a timeline's bars, with usage."""

_MERGEABLE = {
    "TEXT_MESSAGE_CONTENT": "messageId",
    "TOOL_CALL_ARGS": "toolCallId",
    "REASONING_MESSAGE_CONTENT": "messageId",
}


# One encoder each: json.dumps builds one per call.
_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_loose = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


_STEP_KEYS = ("type", "stepName", "timestamp")
# kind -> step name -> the event's JSON text up to its timestamp, made storable: a run's steps repeat a few names
_step_prefixes: dict[str, dict[str, str]] = {"STEP_STARTED": {}, "STEP_FINISHED": {}}
_MAX_NAMES = 4096
_stamp_text: tuple[int, str] = (0, "0")  # the last timestamp written, and its text


def _step_prefix(kind: str, name: str) -> str:
    prefixes = _step_prefixes[kind]
    if len(prefixes) >= _MAX_NAMES:
        prefixes.clear()
    text = f'{{"type":"{kind}","stepName":{_encoder.encode(name)},"timestamp":'
    prefixes[name] = text = text if text.isascii() else scrub(text)
    return text


def step_text(kind: str, name: str, stamp: int) -> str:
    """A STEP_STARTED or STEP_FINISHED event (``kind``) of step ``name`` at ``stamp`` (ms), as
    :func:`dumps` writes it: ``run.step`` adds its own as this text, no dict made and encoded."""
    global _stamp_text
    prefix = _step_prefixes[kind].get(name) or _step_prefix(kind, name)
    last, text = _stamp_text
    if last != stamp:  # a step's two events, and the next steps', mostly fall in one millisecond
        _stamp_text = stamp, text = stamp, str(stamp)
    return f"{prefix}{text}}}"


def dumps(value: Any) -> str:
    """An event as JSON text every store keeps and every client reads.

    The values agent code hands over (results, payloads, emitted values) are checked before
    they become events; what else arrives (a framework's streamed text) is made storable here, as
    a UTF-8 decoder would: a lone surrogate becomes U+FFFD, and NaN or Infinity ``null``.

    A step's STEP_STARTED and STEP_FINISHED (two per step) are written as the text made once
    per step name up to the timestamp, then the timestamp: the same text the encoder writes, for
    a third of its work (measured: 6.3k instructions a call against the encoder's 18k).
    """
    if type(value) is str:
        return value  # written already (step_text)
    if type(value) is dict and len(value) == 3:
        kind = value.get("type")
        if type(kind) is str and kind in _step_prefixes and tuple(value) == _STEP_KEYS:
            name, stamp = value["stepName"], value["timestamp"]
            if type(name) is str and type(stamp) is int:
                return step_text(kind, name, stamp)
    try:
        text = _encoder.encode(value)
    except ValueError:  # NaN or Infinity, which JSON has not
        text = _encoder.encode(json.loads(_loose.encode(value), parse_constant=lambda constant: None))
    return text if text.isascii() else scrub(text)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


_time_ns = time.time_ns


def run_started(run_id: str, thread_id: str, attempt: int = 1, **more: Any) -> dict[str, Any]:
    """A segment begins. ``attempt`` (in AG-UI's open ``metadata``, under our key) counts the
    executions a crash cut short: a run recovered after one starts again with attempt 2.
    ``more`` joins it there: ``answered`` (who answered the interrupt this segment resumes, and when)."""
    return {
        "type": "RUN_STARTED",
        "threadId": thread_id,
        "runId": run_id,
        "metadata": {"agent-unit": {"attempt": attempt, **more}},
        "timestamp": now_ms(),
    }


def run_finished(run_id: str, thread_id: str, result: Any, usage: list[dict[str, Any]]) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "RUN_FINISHED",
        "threadId": thread_id,
        "runId": run_id,
        "result": result,
        "timestamp": now_ms(),
    }
    if usage:
        event["usage"] = usage
    return event


def run_error(message: str, code: str) -> dict[str, Any]:
    return {"type": "RUN_ERROR", "message": message, "code": code, "timestamp": now_ms()}


def run_interrupted(run_id: str, thread_id: str, interrupt: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "RUN_INTERRUPTED",
        "threadId": thread_id,
        "runId": run_id,
        "interrupt": interrupt,
        "timestamp": now_ms(),
    }


def run_sleeping(run_id: str, thread_id: str, wake_at: str) -> dict[str, Any]:
    return {"type": "RUN_SLEEPING", "threadId": thread_id, "runId": run_id, "wakeAt": wake_at, "timestamp": now_ms()}


def run_cancelled(run_id: str, thread_id: str) -> dict[str, Any]:
    return {"type": "RUN_CANCELLED", "threadId": thread_id, "runId": run_id, "timestamp": now_ms()}


def step_started(name: str) -> dict[str, Any]:
    return {"type": "STEP_STARTED", "stepName": name}


def step_finished(name: str, error: dict[str, Any] | None = None) -> dict[str, Any]:
    """Closes a step. One that raised carries ``metadata: {"agent-unit": {"status": "failed", "error":
    {type, message}}}`` (AG-UI's open ``metadata``, under our key as the AG-UI route's own events
    have it), so STEP_STARTED and STEP_FINISHED stay paired for AG-UI clients."""
    if error is None:
        return {"type": "STEP_FINISHED", "stepName": name}
    failed = {"status": "failed", "error": error}
    return {"type": "STEP_FINISHED", "stepName": name, "metadata": {"agent-unit": failed}}


def step_retry(name: str, attempt: int, error: dict[str, Any], delay: float) -> dict[str, Any]:
    """A step's attempt failed and it is tried again after ``delay`` seconds (``run.step(retry=...)``)."""
    value = {"stepName": name, "attempt": attempt, "error": error, "retryInSeconds": delay}
    return {"type": "CUSTOM", "name": "agent-unit.step-retry", "value": value}


MESSAGE = "agent-unit.message"
INTERRUPT_EXPIRED = "agent-unit.interrupt-expired"
"""CUSTOM event: nobody answered an interrupt by its deadline (right after the woken segment's RUN_STARTED)."""
RETRIED = "agent-unit.retried"
"""CUSTOM event: a failed run was retried from the work that failed (right after its RUN_STARTED)."""
"""The CUSTOM event that holds a message sent to a live run (``RunEngine.send``): ``{messageId, value}``."""


def custom(name: str, value: Any) -> dict[str, Any]:
    return {"type": "CUSTOM", "name": name, "value": value}


class EventBuffer:
    """Events waiting for the next write, with deltas merged within ``batch_ms``."""

    __slots__ = ("_batch_ms", "_merge_until", "_pending")

    def __init__(self, batch_ms: int) -> None:
        self._batch_ms = batch_ms
        self._pending: list[dict[str, Any] | str] = []  # events, or their JSON text (step_text)
        self._merge_until = 0

    def __bool__(self) -> bool:
        return bool(self._pending)

    def add(self, event: dict[str, Any]) -> None:
        stamp = _time_ns() // 1_000_000  # now_ms() inlined here and in drain: twice per step
        event.setdefault("timestamp", stamp)
        id_field = _MERGEABLE.get(event["type"])
        if id_field and self._batch_ms > 0 and self._pending and stamp <= self._merge_until:
            last = self._pending[-1]
            if type(last) is dict and last["type"] == event["type"] and last.get(id_field) == event.get(id_field):
                last["delta"] += event["delta"]
                return
        if id_field:
            self._merge_until = stamp + self._batch_ms
        self._pending.append(event)

    def add_text(self, text: str) -> None:
        """An event already written as JSON text (:func:`step_text`): never merged."""
        self._pending.append(text)

    def drain(self, *extra: dict[str, Any] | str) -> list[str]:
        """The pending events (then ``extra``) as JSON, emptying the buffer."""
        stamp = _time_ns() // 1_000_000
        for event in extra:
            if type(event) is dict:
                event.setdefault("timestamp", stamp)
        events = list(map(dumps, (*self._pending, *extra)))  # no comprehension's frame, once per step
        self._pending.clear()
        return events
