"""The run record and the journal entry: what the engine saves and what the API returns."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, field_validator
from pydantic.alias_generators import to_camel, to_snake

from ._limits import Limits

__all__ = [
    "FINISHED",
    "Answer",
    "ErrorFrame",
    "Interrupt",
    "JournalEntry",
    "RunError",
    "RunPage",
    "RunEvent",
    "RunRecord",
    "RunStatus",
    "RetryMark",
    "StoredEvent",
    "agui_usage",
    "assign",
    "record_usage",
]


class RunStatus(StrEnum):
    queued = "queued"
    running = "running"
    interrupted = "interrupted"
    sleeping = "sleeping"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"


FINISHED = frozenset({RunStatus.completed, RunStatus.failed, RunStatus.cancelled})


class Interrupt(BaseModel):
    """What a parked run waits for: its name, the payload to show, and the answer's JSON Schema."""

    name: str
    key: str
    payload: Any = None
    answer_schema: dict[str, Any] | None = None
    answer_type: str | None = None  # ``module:QualName`` of the answer's class, to validate it fully on resume
    expires_at: datetime | None = None
    """When the interrupt stops waiting (``run.interrupt(..., timeout=...)``); None: it waits for good."""


class Answer(BaseModel):
    """Who answered an interrupt, and when: one per resume (or expiry) of the run, oldest first.

    ``by`` is the identity ``authorize`` returned for the resume (or the request's authenticated
    user); None when the deployment knows nobody. ``expired``: nobody answered by the deadline.
    """

    interrupt: str
    key: str
    by: str | None = None
    at: datetime
    expired: bool = False


class RetryMark(BaseModel):
    """The run's last retry: the work it runs again, and how much journal it must replay first.

    ``superseded`` maps each journal key run again by a retry to the attempt whose entry now
    holds its outcome (the failed entry stays in the store, read by nobody). ``replays``: how
    many entries the code must replay before it may run anything new (other than ``key``),
    so code changed in a way that no longer matches the journal is refused, naming the step.
    """

    key: str | None = None
    replays: int = 0
    unfinished: list[str] = []
    """Work that was still running beside the failure: new work the retry may run before ``replays``
    entries are replayed (the journal order of concurrent work is not the order it starts in)."""
    superseded: dict[str, int] = {}
    at: datetime
    count: int = 1


def record_usage(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Token usage as the run record holds it: snake_case keys (``input_tokens``), like the rest
    of the REST API's JSON. The journal and AG-UI events keep AG-UI's camelCase (``inputTokens``)."""
    return [{to_snake(key): value for key, value in entry.items()} for entry in entries]


def agui_usage(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The record's usage as AG-UI's ``TokenUsage`` entries (camelCase), for events."""
    return [{to_camel(key): value for key, value in entry.items()} for entry in entries]


class ErrorFrame(BaseModel):
    """One line of the user's own code in a failed run's traceback."""

    file: str
    line: int | None = None
    function: str
    code: str = ""


class RunError(BaseModel):
    """Why a run failed. ``frames``: the user's own code on the way to the error, outermost first
    (agent-unit's frames left out); empty for records saved before they were kept."""

    type: str
    message: str
    step: str | None = None
    key: str | None = None
    """The journal key of the step (or model or tool call) that failed: what a retry runs again."""
    unfinished: list[str] = []
    """The journal keys of work still running beside the failed one (other branches of an
    ``asyncio.gather``): nothing of it was journaled, so a retry runs it again too."""
    frames: list[ErrorFrame] = []


class RunRecord(BaseModel):
    """One run. Every change is saved with compare-and-set on ``version``.

    ``lease_owner``/``lease_expires`` belong to the executor that holds the run now;
    ``due_at`` is when the sweep should look at it next (a sleeper's wake time, a lapsing
    lease, a finished run's deletion time) and is the one index the sweep reads.
    """

    id: str
    agent: str
    thread_id: str
    status: RunStatus
    input: Any = None
    output: Any = None
    error: RunError | None = None
    interrupt: Interrupt | None = None
    wake_at: datetime | None = None
    usage: list[dict[str, Any]] = []
    attempt: int = 1
    answers: list[Answer] = []
    retry: RetryMark | None = None
    limits: Limits | None = None
    """What the run may spend (tokens, model calls, cost), checked before each model call."""
    settling: list[str] | None = None
    """After a cancel of a running run: the steps still running (a thread cannot be stopped), until
    the process executing them says they have ended, or is gone (its lease, which it renews while
    they run, lapsed, or the OS shows it ended); None once nothing of the run runs anywhere."""
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None
    version: int = 0
    lease_owner: str | None = None
    lease_expires: float | None = None
    due_at: float | None = None
    trace: dict[str, str] | None = None
    """The run's trace context (W3C ``traceparent``/``tracestate``) when OpenTelemetry is on, so
    every execution of the run, in any process, joins the one trace (see :mod:`agent_unit._otel`)."""

    @field_validator("usage", mode="before")
    @classmethod
    def _snake_case_usage(cls, value: Any) -> Any:
        """Usage in snake_case whatever it was saved in (records saved before the convention)."""
        return record_usage(value) if isinstance(value, list) and all(isinstance(v, dict) for v in value) else value

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def public(self) -> dict[str, Any]:
        """The record as the API shows it: no lease bookkeeping or trace context, and no ``answer_type`` (the
        module path of the answer's class, internal to validating a resume; the interrupt's
        ``answer_schema`` describes the answer)."""
        return self.model_dump(mode="json", exclude=_PRIVATE)

    def public_json(self) -> bytes:
        """:meth:`public` as JSON (UTF-8), encoded by pydantic in one pass: no dict is built and
        no Python encoder walks it. Raises ``PydanticSerializationError`` for a lone surrogate."""
        return self.__pydantic_serializer__.to_json(self, exclude=_PRIVATE)


def assign(record: RunRecord, **fields: Any) -> None:
    """Set ``fields`` of ``record`` as ``record.name = value`` does for each, in one call.

    A RunRecord validates no assignment, so pydantic's ``__setattr__`` stores the value and marks
    the field set: two Python calls per field, and a claim and an end set eight fields each
    (~2% of a resume over HTTP, measured). Only for fields of the model (a test pins that the
    record comes out the same).
    """
    record.__dict__.update(fields)
    record.__pydantic_fields_set__.update(fields)


_PRIVATE: Any = {
    "lease_owner": True,
    "lease_expires": True,
    "due_at": True,
    "trace": True,
    "interrupt": {"answer_type"},
}


# The fields kept in the store's JSON column; the rest are columns of their own.
DATA_FIELDS = frozenset(
    {
        "input",
        "output",
        "error",
        "interrupt",
        "wake_at",
        "usage",
        "attempt",
        "answers",
        "retry",
        "settling",
        "limits",
        "created_at",
        "updated_at",
        "finished_at",
        "trace",
    }
)


@dataclass(slots=True)
class JournalEntry:
    """One finished piece of work. ``value`` is JSON text, so a replay parses it only when used."""

    key: str
    value: str | None = None
    error: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None


@dataclass(slots=True)
class StoredEvent:
    seq: int
    data: str  # the event's JSON, without its seq (the seq is the SSE id)

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, **json.loads(self.data)}


class RunEvent(BaseModel):
    """One event of a run as a client reads it: its ``seq`` (the SSE id), its ``type``, and
    ``data``, the event's JSON exactly as AG-UI (or agent-unit, for its own types) defines it:
    ``event.data["runId"]``, ``event.data["delta"]``..."""

    seq: int
    type: str
    data: dict[str, Any]

    @classmethod
    def parse(cls, seq: int, text: str) -> RunEvent:
        data = json.loads(text)
        return cls(seq=seq, type=data.get("type", ""), data=data)


@dataclass(slots=True)
class RunPage:
    runs: list[RunRecord] = field(default_factory=list)
    next_cursor: str | None = None
