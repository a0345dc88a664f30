"""Interrupt deadlines: what an expiry journals, how a replay reads it, and the answer that is late.

``run.interrupt(..., timeout="2d", default=...)`` parks with a deadline on the interrupt; the run
record's due time is that deadline, so the sweep, a timer or the host's scheduler wakes the run
as it wakes a sleeper (nothing is held in memory meanwhile). Waking it journals the expiry under
the interrupt's key, in place of an answer: every replay after it reads the same entry and takes
the same branch (the ``default``, or :class:`~agent_unit.errors.InterruptExpired` raised where
the agent waited), even if an answer arrives later. It does not: a resume after the deadline is
refused with why (:func:`late_answer`).
"""

from __future__ import annotations

from datetime import datetime

from ._records import JournalEntry, RunRecord, RunStatus
from .errors import InterruptExpired

__all__ = ["expired_at", "expiry_entry", "late_answer"]

_EXPIRED = "expired"


def expiry_entry(key: str, at: datetime) -> JournalEntry:
    """The journal entry of an interrupt (under ``key``) whose deadline ``at`` passed unanswered."""
    return JournalEntry(key, "null", meta={_EXPIRED: at.isoformat()})


def expired_at(entry: JournalEntry) -> str | None:
    """When the interrupt journaled as ``entry`` expired (ISO 8601), or None if it was answered."""
    at = (entry.meta or {}).get(_EXPIRED)
    return at if isinstance(at, str) else None


def late_answer(record: RunRecord, now: float) -> InterruptExpired | None:
    """Why an answer to ``record`` now comes too late, or None: the interrupt it waits at is past its
    deadline (the sweep has not woken it yet), or the run went on after its last interrupt expired."""
    interrupt = record.interrupt
    if record.status == RunStatus.interrupted and interrupt is not None:
        if interrupt.expires_at is None or interrupt.expires_at.timestamp() > now:
            return None
        name, key, at = interrupt.name, interrupt.key, interrupt.expires_at
    elif record.answers and record.answers[-1].expired:
        last = record.answers[-1]
        name, key, at = last.interrupt, last.key, last.at
    else:
        return None
    return InterruptExpired(
        f"interrupt {name!r} of run {record.id} expired at {at.isoformat()}: the run goes on without an answer",
        details={"interrupt": name, "key": key},
    )
