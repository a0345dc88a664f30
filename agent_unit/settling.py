"""After a cancel: which steps of the run may still be running, read off its events.

A cancel of a run executing in another process cannot see that process's steps. The events
can: a ``STEP_STARTED`` of the last segment with no ``STEP_FINISHED`` is a step in flight (a
step shows ``STEP_STARTED`` once it has run ``agent_unit.run.STEP_STARTED_WAIT``; a quicker one
has finished anyway, or is named by the process that runs it when it says it has settled).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .records import StoredEvent

__all__ = ["unfinished_steps"]


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
