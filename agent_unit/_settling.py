"""After a cancel: which steps of the run may still be running, and when nothing of it runs.

A cancel of a run executing in another process cannot see that process's steps. The events
can: a ``STEP_STARTED`` of the last segment with no ``STEP_FINISHED`` is a step in flight (a
step shows ``STEP_STARTED`` once it has run ``agent_unit.run.STEP_STARTED_WAIT``; a quicker one
has finished anyway, or is named by the process that runs it when it says it has settled).

The cancelled record keeps the lease of the process running those steps, and that process
renews it until they end. So nothing runs any more once it says so, or once its lease lapses or
the OS shows it ended (a ``kill -9``): then the sweep, or a cancel, clears ``settling``, as a
lapsed lease lets the sweep recover a run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ._owners import owner_is_gone
from ._records import RunRecord, StoredEvent

__all__ = ["holder_gone", "settled", "unfinished_steps"]


def holder_gone(record: RunRecord, now: float) -> bool:
    """Whether the process that held ``record``'s lease can run nothing of it any more: its lease
    lapsed (it renews it while it runs steps), or the OS shows it ended."""
    lapsed = record.lease_expires is not None and record.lease_expires <= now
    return lapsed or owner_is_gone(record.lease_owner or "")


def settled(record: RunRecord, retention: float | None) -> None:
    """Say on a cancelled record that nothing of it runs anywhere: no lease, no ``settling``, and
    due again when its retention ends (if any)."""
    record.settling = None
    record.lease_owner = record.lease_expires = None
    finished = record.finished_at
    record.due_at = None if retention is None or finished is None else finished.timestamp() + retention


def unfinished_steps(events: Sequence[StoredEvent]) -> list[str]:
    """The names of the steps the last segment of ``events`` started and did not finish, sorted."""
    open_steps: dict[str, int] = {}
    for stored in events:
        event = json.loads(stored.data)
        kind = event.get("type")
        if kind == "RUN_STARTED":
            open_steps.clear()
        elif kind in ("STEP_STARTED", "STEP_FINISHED") and isinstance(event.get("stepName"), str):
            name = event["stepName"]
            count = open_steps.get(name, 0) + (1 if kind == "STEP_STARTED" else -1)
            if count > 0:
                open_steps[name] = count
            else:
                open_steps.pop(name, None)
    return sorted(open_steps)
