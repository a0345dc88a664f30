"""The store protocol: what every store guarantees, exactly, across processes.

- ``save_run`` is a compare-and-set on ``version``: it lands only if nobody saved the run
  since it was read; the loser gets :class:`~agent_unit.errors.RunConflict`.
- ``append`` is fenced by the lease: it lands only while ``owner`` holds the run's lease
  and the run is ``running``; otherwise :class:`~agent_unit.errors.LeaseLost`.
- Event seqs are minted inside the write that stores them: strictly increasing per run,
  never repeated, never reused after a restart.
- Journal entries are unique per ``(run, key)``: a second write of a key is a conflict.
- ``claim_tick`` is an atomic conditional write on ``(task, scheduled_at)``: one caller at a time
  holds each tick of a scheduled task, however many servers share the store; a claim is a lease
  that its holder renews and finishes, and a lapsed unfinished claim is taken over by one caller.
- ``load_journal`` is one round trip; ``due_runs`` reads an index on ``due_at``, so the
  sweep's cost follows the runs that are due, not all runs. (The SQLite and D1 stores keep
  running runs out of that index, since each lease renewal would move their entry, and read
  them through the status index: there the sweep also reads the runs in flight.)

A journal entry or record change and the events it produces are written in one
transaction, so a journaled step costs one commit.

Errors: a store tells an outage from a bad value, because the engine acts on the difference.

- :class:`~agent_unit.errors.StoreUnavailable`: the store itself failed (cannot be reached,
  a timeout, a lock held too long, throttling, a wrong password). The write may succeed later:
  the engine stops the run and recovers it from its journal; HTTP answers 503 with
  ``Retry-After``. Its message names the store's kind only, never a host, port or database.
- :class:`~agent_unit.errors.StoreValueError`: the value cannot be stored (text that is not
  valid Unicode, such as a lone surrogate; a number or size the store cannot hold; JSON it
  refuses). Nothing was written and the same write would fail again, so the engine makes it
  the run's error (a request's: 422). Every store refuses a lone surrogate, the memory store
  included, so a test fails as production would.
- :class:`~agent_unit.errors.StoreConfigError`: the URL cannot be used as written; raised when
  the store is opened.

Anything else a store raises is a bug, never an outage. ``read_events`` takes any ``after``
(a seq past every event reads nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .._records import JournalEntry, RunPage, RunRecord, RunStatus, StoredEvent

__all__ = ["TICK_MEMORY", "Store"]

TICK_MEMORY = 2 * 86400.0
"""How long a store remembers a claimed tick (seconds after it): a scheduler never claims one older."""


@runtime_checkable
class Store(Protocol):
    url: str
    """The store's URL with any password removed: safe for logs and errors."""

    async def create_run(self, record: RunRecord, *, events: Sequence[str] = ()) -> int:
        """Insert a new run and its first events; return the last seq minted (0 if none).

        Raises ``RunConflict`` if the id exists.
        """
        ...

    async def load_run(self, run_id: str) -> RunRecord | None: ...

    async def save_run(
        self,
        record: RunRecord,
        *,
        expected_version: int,
        journal: Sequence[JournalEntry] = (),
        events: Sequence[str] = (),
    ) -> int:
        """Compare-and-set: store ``record`` as version ``expected_version + 1``.

        Lands only if the stored version is still ``expected_version``, together with
        ``journal`` and ``events`` in one transaction. Returns the last seq minted. A run's
        ``agent`` and ``thread_id`` are fixed when it is created: a store may keep the stored ones.
        """
        ...

    async def append(
        self, run_id: str, *, owner: str, journal: Sequence[JournalEntry] = (), events: Sequence[str] = ()
    ) -> int:
        """Write journal entries and events while ``owner`` holds the lease of a running run."""
        ...

    async def renew_lease(self, run_id: str, *, owner: str, expires: float) -> int | None:
        """Extend the lease and bump the version; the new version, or None if ``owner`` lost it.

        Bumping the version makes a takeover that read the run before the renewal lose its
        compare-and-set, so a lease can only be taken over once it has really lapsed.
        """
        ...

    async def load_journal(self, run_id: str) -> dict[str, JournalEntry]: ...

    async def read_events(self, run_id: str, *, after: int = 0, limit: int | None = None) -> list[StoredEvent]: ...

    async def last_seq(self, run_id: str) -> int:
        """The seq of the run's newest event (0 when it has none): where a new stream starts."""
        ...

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        agent: str | None = None,
        thread_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunPage:
        """Newest first; ``cursor`` is the previous page's ``next_cursor``."""
        ...

    async def due_runs(self, *, before: float, limit: int = 100) -> list[RunRecord]:
        """Runs whose ``due_at`` is at or before ``before``, soonest first."""
        ...

    async def delete_run(self, run_id: str) -> bool:
        """Delete a run, its journal and its events; False if it did not exist."""
        ...

    async def get_state(self, scope: str, key: str) -> str | None: ...

    async def set_state(self, scope: str, key: str, value: str) -> None: ...

    async def delete_state(self, scope: str, key: str) -> None: ...

    async def close(self) -> None: ...

    # -- scheduled tasks -------------------------------------------------------------------

    async def claim_tick(self, task: str, scheduled_at: float, owner: str, *, now: float, expires: float) -> bool:
        """Claim one tick of a scheduled task for ``owner`` until ``expires``: True for exactly one
        caller, False for all the others, across every process over the store.

        A claim wins when the tick was never claimed, or when its claim is unfinished and its lease
        lapsed (the claim's ``expires`` is before ``now``): the takeover of a claimant that died. An
        atomic conditional write (never a read then a write), so among racers exactly one wins. A
        finished tick is never claimed again. A claim is remembered for :data:`TICK_MEMORY` after
        its tick; older claims may be forgotten.
        """
        ...

    async def renew_tick(self, task: str, scheduled_at: float, owner: str, *, expires: float) -> bool:
        """Extend ``owner``'s unfinished claim to ``expires``; False (nothing written) if ``owner``
        no longer holds it: it was taken over, finished or forgotten."""
        ...

    async def finish_tick(self, task: str, scheduled_at: float, owner: str) -> bool:
        """Record the tick as done, so no caller claims it again; False (nothing written) if
        ``owner`` no longer holds an unfinished claim on it."""
        ...

    async def lapsed_ticks(self, task: str, *, since: float, now: float) -> list[float]:
        """The ticks of ``task`` at or after ``since`` whose claim is unfinished and whose lease
        lapsed before ``now``, oldest first: the ones to try :meth:`claim_tick` on again (another
        caller may take one first)."""
        ...
