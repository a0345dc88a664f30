"""How a run record is split into indexed columns and one JSON document, for SQL stores."""

from __future__ import annotations

import json
from typing import Any

from ..records import DATA_FIELDS, JournalEntry, RunRecord

RUN_COLUMNS = ("id", "agent", "thread_id", "status", "version", "lease_owner", "lease_expires", "due_at", "data")


def run_row(record: RunRecord) -> tuple[Any, ...]:
    """The values of ``RUN_COLUMNS`` for ``record``."""
    return (
        record.id,
        record.agent,
        record.thread_id,
        record.status.value,
        record.version,
        record.lease_owner,
        record.lease_expires,
        record.due_at,
        record.model_dump_json(include=DATA_FIELDS),
    )


def run_from_row(row: tuple[Any, ...]) -> RunRecord:
    run_id, agent, thread_id, status, version, lease_owner, lease_expires, due_at, data = row
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
        None if entry.error is None else json.dumps(entry.error),
        None if entry.meta is None else json.dumps(entry.meta),
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
