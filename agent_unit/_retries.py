"""Retrying a failed run from the work that failed: which journal a retry replays, and the check
that the code deployed now still replays it.

A retry keeps the journal as it is. The failed entry (a step, model or tool call that raised)
stays in the store, superseded: the retried execution reads the journal through
:func:`journal_view`, which leaves the failed entry out, so that work runs again with the same
idempotency key, and its new outcome is written under :func:`stored_key` (journal keys are
unique per run in every store, so the new outcome cannot take the old one's key). No store needs
an operation of its own: the superseded keys live in the run record (:class:`RetryMark`).

The code that continues is the code deployed now (after the fix). Up to the failed work it must
make the calls it made before: :func:`check_new_work` refuses new work (other than the failed
work and the work still running beside it when it failed) while entries recorded before the
failure are still to be replayed, with a :class:`NonDeterminismError` that names the
step, instead of running a side effect the journal does not expect.
"""

from __future__ import annotations

from datetime import datetime

from ._records import JournalEntry, RetryMark, RunRecord
from .errors import NonDeterminismError

__all__ = ["check_new_work", "journal_view", "next_mark", "stored_key"]


def stored_key(key: str, mark: RetryMark | None) -> str:
    """The key under which the outcome of the work journaled as ``key`` is stored now."""
    if mark is None:
        return key
    retry = mark.superseded.get(key)
    return key if retry is None else f"{key}~retry{retry}"


def journal_view(journal: dict[str, JournalEntry], mark: RetryMark | None) -> dict[str, JournalEntry]:
    """The journal as the run replays it: each superseded entry replaced by its newest outcome (if
    the retried work has finished again), keyed by the work's own key."""
    if mark is None or not mark.superseded:
        return journal
    view = dict(journal)
    for key, retry in mark.superseded.items():
        view.pop(key, None)
        for older in range(1, retry):
            view.pop(f"{key}~retry{older}", None)
        newest = view.pop(f"{key}~retry{retry}", None)
        if newest is not None:
            newest.key = key
            view[key] = newest
    return view


def next_mark(record: RunRecord, journal: dict[str, JournalEntry], now: datetime) -> RetryMark:
    """The mark of a new retry of the failed ``record`` whose stored journal is ``journal``."""
    previous = record.retry
    count = 1 if previous is None else previous.count + 1
    superseded = {} if previous is None else dict(previous.superseded)
    failed = record.error.key if record.error is not None else None
    given = [*(record.error.unfinished if record.error is not None else ()), *(previous.unfinished if previous else ())]
    unfinished = sorted({key for key in given if key not in journal})
    view = journal_view(journal, previous)
    if failed is not None and failed in view and view[failed].error is not None:
        superseded[failed] = count
        replays = len(view) - 1
        key: str | None = failed
    elif previous is not None:
        # Failed between steps (agent code), or before reaching the work the last retry runs
        # again (the code no longer replays): that work, and every entry recorded since, stay due.
        replays, key = max(previous.replays, len(view)), previous.key
    else:
        replays, key = len(view), None
    return RetryMark(key=key, replays=replays, unfinished=unfinished, superseded=superseded, at=now, count=count)


def check_new_work(mark: RetryMark | None, *, replayed: int, key: str, name: str, run_id: str, agent: str) -> None:
    """Refuse new work (named ``name``, under journal ``key``) that a retried run's journal does not
    expect: any work but the retried one, or work that was still running beside the failure
    (``asyncio.gather``'s other branches, which may start before journaled siblings replay), while
    entries recorded before the failure are still to be replayed (``replayed`` of them have been)."""
    if mark is None or replayed >= mark.replays or key == mark.key or key in mark.unfinished:
        return
    left = mark.replays - replayed
    raise NonDeterminismError(
        f"run {run_id} was retried, but agent {agent!r} now runs {name!r} ({key}) where its journal "
        f"still holds {left} earlier entr{'y' if left == 1 else 'ies'} to replay: up to the work that failed, "
        "the code must make the same calls as when the run first ran. Undo the change that moved it, "
        "or start a new run"
    )
