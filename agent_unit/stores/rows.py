"""How a run record is split into indexed columns and one JSON document, for SQL stores.

Also the one rule every store follows for a value it cannot keep (:func:`value_error`): JSON is
written with ``ensure_ascii=False``, so text that is not valid Unicode (a lone surrogate) fails
when the driver encodes it, before anything is written, instead of being stored escaped and
refused by another store.

Public, so that a store kept outside this package (Cloudflare's, a third party's) writes rows
the same way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from json.encoder import encode_basestring
from typing import Any

from pydantic_core import PydanticSerializationError

from .._records import DATA_FIELDS, JournalEntry, RunRecord
from ..errors import StoreValueError

_INCLUDE: set[str] = set(DATA_FIELDS)  # pydantic takes a set, not a frozenset

VALUE_ERRORS = (UnicodeEncodeError, OverflowError, PydanticSerializationError)
"""What a driver raises for a value it cannot encode: the value's fault, never an outage."""


def value_error(exc: BaseException) -> StoreValueError:
    """``exc`` (one of ``VALUE_ERRORS``, or a driver's data error) as the error of the value."""
    if isinstance(exc, UnicodeEncodeError):
        bad = exc.object[exc.start : exc.end]
        return StoreValueError(
            f"a value cannot be stored: it holds {bad!r}, which is not valid Unicode text (a lone surrogate)"
        )
    if "surrogates not allowed" in str(exc):  # the same, wrapped by the JSON encoder of a record
        return StoreValueError("a value cannot be stored: it holds a lone surrogate, which is not valid Unicode text")
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return StoreValueError(f"a value cannot be stored: {reason}")


def check_text(*texts: str | None) -> None:
    """Refuse text that is not valid Unicode, for stores whose driver would not (memory, escaped JSON)."""
    for text in texts:
        if text is not None and not text.isascii():
            try:
                text.encode()
            except UnicodeEncodeError as exc:
                raise value_error(exc) from None


def check_writes(journal: Sequence[JournalEntry], events: Sequence[str]) -> None:
    """:func:`check_text` over everything a write would store."""
    for entry in journal:
        check_text(entry.key, entry.value, *(_dumps(entry.error), _dumps(entry.meta)))
    check_text(*events)


# One encoder: json.dumps with any argument but the value builds a new one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False)


def _dumps(value: Any) -> str | None:
    return None if value is None else _ENCODER.encode(value)


RUN_COLUMNS = ("id", "agent", "thread_id", "status", "version", "lease_owner", "lease_expires", "due_at", "data")


def run_row(record: RunRecord) -> tuple[Any, ...]:
    """The values of ``RUN_COLUMNS`` for ``record``; a field that cannot be JSON is a StoreValueError."""
    try:
        data = record.model_dump_json(include=_INCLUDE)
    except PydanticSerializationError as exc:
        raise value_error(exc) from None
    return (
        record.id,
        record.agent,
        record.thread_id,
        record.status.value,
        record.version,
        record.lease_owner,
        record.lease_expires,
        record.due_at,
        data,
    )


def _finite(value: Any) -> bool:
    return value is None or (type(value) is float and math.isfinite(value))


def run_from_row(row: tuple[Any, ...]) -> RunRecord:
    run_id, agent, thread_id, status, version, lease_owner, lease_expires, due_at, data = row
    if (
        type(run_id) is str
        and type(agent) is str
        and type(thread_id) is str
        and type(status) is str
        and type(version) is int
        and (lease_owner is None or type(lease_owner) is str)
        and _finite(lease_expires)
        and _finite(due_at)
        and type(data) is str
        and data.startswith('{"')
    ):
        # The columns joined to the JSON document and validated by pydantic in one pass from the
        # text: a third fewer instructions than parsing the document and validating the dict.
        # Columns of a driver's own types (a Decimal) take the way below.
        owner = "null" if lease_owner is None else encode_basestring(lease_owner)
        expires = "null" if lease_expires is None else repr(lease_expires)
        due = "null" if due_at is None else repr(due_at)
        return RunRecord.model_validate_json(
            f'{{"id":{encode_basestring(run_id)},"agent":{encode_basestring(agent)},'
            f'"thread_id":{encode_basestring(thread_id)},"status":{encode_basestring(status)},"version":{version},'
            f'"lease_owner":{owner},"lease_expires":{expires},"due_at":{due},{data[1:]}'
        )
    fields = json.loads(data)
    fields.update(
        id=run_id,
        agent=agent,
        thread_id=thread_id,
        status=status,
        version=version,
        lease_owner=lease_owner,
        lease_expires=lease_expires,
        due_at=due_at,
    )
    return RunRecord.model_validate(fields)


def journal_row(run_id: str, entry: JournalEntry) -> tuple[Any, ...]:
    return (
        run_id,
        entry.key,
        entry.value,
        _dumps(entry.error),
        _dumps(entry.meta),
    )


def journal_from_row(key: str, value: str | None, error: str | None, meta: str | None) -> JournalEntry:
    return JournalEntry(
        key,
        value,
        None if error is None else json.loads(error),
        None if meta is None else json.loads(meta),
    )


def list_filter(placeholder: str, **conditions: object) -> tuple[str, list[str]]:
    """The ``WHERE`` clause (or "") and its parameters for listing runs, newest first after ``cursor``.

    ``conditions``: ``status``, ``agent``, ``thread_id`` and ``cursor``; a ``None`` is no condition.
    """
    columns = {"status": "status = {}", "agent": "agent = {}", "thread_id": "thread_id = {}", "cursor": "id < {}"}
    where, params = [], []
    for name, value in conditions.items():
        if value is not None:
            where.append(columns[name].format(placeholder))
            params.append(str(value))
    return (f"WHERE {' AND '.join(where)}" if where else ""), params


DUE_INDEX = "CREATE INDEX IF NOT EXISTS runs_due ON runs (due_at) WHERE due_at IS NOT NULL AND status != 'running'"
"""The due-time index of a SQLite-dialect ``runs`` table (the SQLite and D1 stores'). A running run's
due time is its lease's expiry, moved by its creation, every renewal and its park: left out of the
index, each of those writes changes one index entry fewer (two of the seventeen WAL pages of a run's
start to a pause, measured). :data:`DUE_RUNS` finds the running runs through ``runs_status``
instead: they are the runs in flight."""

_RUN_SELECT = ", ".join(RUN_COLUMNS)
DUE_RUNS = (
    f"SELECT {_RUN_SELECT} FROM (SELECT * FROM runs WHERE due_at <= ? AND status != 'running' ORDER BY due_at LIMIT ?) "
    f"UNION ALL SELECT {_RUN_SELECT} FROM runs WHERE status = 'running' AND due_at <= ? ORDER BY due_at LIMIT ?"
)
"""``due_runs`` over :data:`DUE_INDEX`: the runs due by a time, soonest first, at most a limit; its
parameters are ``(before, limit, before, limit)``. It reads a table whose index still holds running
runs (made before) correctly too."""
