"""One execution of a run: the lease it holds, the events it buffers, the budget it spends.

The :class:`~agent_unit.run.Run` an agent sees writes through this object, and the engine
reads its outcome from it. It lives only while the run executes: a parked run has none.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._events import EventBuffer
from ._parks import Cancelled, Yielded
from ._prices import Prices
from ._records import JournalEntry, RunRecord
from ._retries import stored_key
from .errors import VALUE_ERRORS, AgentUnitError, LeaseLost, RunConflict, StepResultError, StoreUnavailable
from .stores import Store

if TYPE_CHECKING:
    from ._otel import ExecutionTelemetry

__all__ = ["CLAIM_WAIT", "DeferredClaim", "Execution", "TurnLock"]

log = logging.getLogger("agent_unit.execution")

CLAIM_WAIT = 0.05
"""Seconds a deferred claim waits for the execution's first write before it is written alone."""

# A write refused for what it holds (not JSON, not UTF-8, too large): never a store outage.
_REFUSED: tuple[type[BaseException], ...] = (AgentUnitError, *VALUE_ERRORS)


class TurnLock:
    """An asyncio lock (first come, first served) whose free case is taken without awaiting.

    ``asyncio.Lock.acquire`` is a coroutine even when the lock is free: with its release, 2.3k
    instructions, paid by every step's commit. Here :meth:`take` takes a free lock in a call,
    and :meth:`acquire` waits when it is not. A release hands the lock to the first waiter still
    waiting (it stays held), so the lock is free only when nobody waits for it.
    """

    __slots__ = ("_held", "_waiters")

    def __init__(self) -> None:
        self._held = False
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def locked(self) -> bool:
        return self._held

    def take(self) -> bool:
        """Take the lock if it is free: True; False if it is held (then ``await acquire()``)."""
        if self._held:
            return False
        self._held = True
        return True

    async def acquire(self) -> bool:
        if not self._held:
            self._held = True
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.cancelled():
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            else:
                self.release()  # handed the lock as it was cancelled: the next waiter gets it
            raise
        return True

    def release(self) -> None:
        if not self._held:
            raise RuntimeError("Lock is not acquired.")
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # handed over: it stays held
                return
        self._held = False

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()


@dataclass(frozen=True, slots=True)
class DeferredClaim:
    """A resume's claim not written yet: the compare-and-set from ``expected`` (the version the
    answer was checked against), with the answer's journal entries and events.

    A resume that waits for its outcome claims the run this way (see ``Executor.claim``): the
    agent replays its journal first, which writes nothing, and the claim goes into the
    execution's first write, so a resume that only replays to its end or next park is one
    transaction, not two. It is written before any new work starts (a step, a model or tool
    call: two racers never both run one), before any event, and at the latest after
    :data:`CLAIM_WAIT`, so an answer is not left in memory while the agent does other things.
    """

    expected: int
    journal: tuple[JournalEntry, ...]
    events: tuple[str, ...]
    deadline: float | None = None
    """The answered interrupt's deadline, whose timer the claim disarmed: if the claim is not
    written, the run may still wait there, and the resume arms that timer again."""


class Execution:
    def __init__(
        self,
        record: RunRecord,
        store: Store,
        *,
        owner: str,
        clock: Any,
        budget: float | None,
        max_step_bytes: int,
        delta_batch_ms: int,
        notify: Callable[[str], None] = lambda run_id: None,
        approval_timeout: float | None = None,
        prices: Prices | None = None,
    ) -> None:
        self.record = record
        self.approval_timeout = approval_timeout  # seconds an adapter's tool approval waits, or None
        self.prices = prices  # what the run's usage costs; None: the run shows no cost
        self.store = store
        self.owner = owner
        self.max_step_bytes = max_step_bytes
        self._notify = notify
        self.signal = asyncio.Event()
        self.events = EventBuffer(delta_batch_ms)
        self.lock = TurnLock()
        self.stop_reason: str | None = None  # "cancelled", "lost" or "shutdown" when stopped from outside
        self._clock = clock
        self._budget = budget
        self._batch_seconds = delta_batch_ms / 1000
        self._started = time.monotonic()
        self._new_steps = 0
        self._flush: asyncio.Handle | None = None
        self._flush_at = 0.0  # when the armed timer fires: Pyodide's WebLoop returns a Handle, with no when()
        self._flush_due: float | None = None  # loop time by which pending events must be written
        self._flushing: set[asyncio.Task[None]] = set()
        self._in_flight = 0
        self._working: dict[str, int] = {}  # the names of the steps in flight, with how many of each
        self._abandoned: dict[asyncio.Future[Any], str] = {}  # sync steps whose thread outlived their await
        self._idle: asyncio.Event | None = None
        self._halt = asyncio.Event()  # set once this execution stops: wakes steps waiting to retry
        self.stopping = False  # set once the agent is done: no new step starts, no renewal runs
        self.telemetry: ExecutionTelemetry | None = None  # this execution's span, when OpenTelemetry is on
        self.left: RunRecord | None = None
        """The record as this execution's last save left it in the store, once that save parked or
        ended the run: what a caller waiting for the execution is answered with, without a read."""
        self.deferred: DeferredClaim | None = None
        """The claim this execution has not written yet (see :class:`DeferredClaim`); None once written."""
        self.unclaimed: AgentUnitError | None = None
        """Why the deferred claim could not be written: a ``RunConflict`` (the run changed since the
        answer was checked) or a ``StoreUnavailable``. The resume that deferred it raises it."""
        self._claim_timer: asyncio.Handle | None = None

    def defer(self, claim: DeferredClaim) -> None:
        """Start without the run claimed: ``claim`` is written with the first write (see :class:`DeferredClaim`)."""
        self.deferred = claim
        self._claim_timer = asyncio.get_running_loop().call_later(CLAIM_WAIT, self._claim_due)

    def claim_written(self) -> None:
        """The deferred claim went into a write that committed (the caller's own save)."""
        self.deferred = None
        if self._claim_timer is not None:
            self._claim_timer.cancel()
            self._claim_timer = None

    def claim_refused(self, error: AgentUnitError) -> None:
        """The deferred claim cannot be written: this execution stops, saving nothing."""
        self.unclaimed = error
        self.stop_reason = self.stop_reason or "changed"
        self.signal.set()

    async def claim(self) -> None:
        """Write the deferred claim now, if there is one: before new work, an event, a renewal."""
        if self.deferred is None:
            return
        lock = self.lock
        if not lock.take():
            await lock.acquire()
        try:
            await self.claim_held()
        finally:
            lock.release()

    async def claim_held(self, journal: tuple[JournalEntry, ...] = (), events: list[str] | None = None) -> None:
        """:meth:`claim`, for a caller holding :attr:`lock`; raises ``Cancelled`` if it cannot be written.

        ``journal`` and ``events`` (given by a save of the record as it is now, the execution's
        first write): written with the claim, in one transaction. Such a save's own trouble other
        than a conflict or an outage (its output refused, a driver's error) is raised as it is,
        with the claim still to write, for the save's caller to handle as it would any save's.
        """
        claim = self.deferred
        if claim is None:
            return
        if self.unclaimed is not None:  # refused once: this execution saves nothing
            raise Cancelled()
        record = self.record
        try:
            await self.store.save_run(
                record,
                expected_version=claim.expected,
                journal=(*claim.journal, *journal),
                events=claim.events if events is None else [*claim.events, *events],
            )
        except Exception as exc:
            if events is not None and not isinstance(exc, (RunConflict, StoreUnavailable)):
                raise  # the save's own trouble: see above
            if isinstance(exc, AgentUnitError):  # someone else changed the run, the store is away, a refusal
                self.claim_refused(exc)
                raise Cancelled() from None
            log.exception("saving the answer to run %s failed", record.id)  # the driver's: the answer is not saved
            self.claim_refused(StoreUnavailable(f"saving the answer to run {record.id} failed: send it again"))
            raise Cancelled() from exc
        record.version = claim.expected + 1
        self.claim_written()
        self._notify(record.id)

    def _claim_due(self) -> None:
        self._claim_timer = None
        if self.deferred is not None:
            task = asyncio.ensure_future(self._claim_soon())
            self._flushing.add(task)
            task.add_done_callback(self._flushing.discard)

    async def _claim_soon(self) -> None:
        with contextlib.suppress(Cancelled):  # refused: the agent stops at its next step (signal)
            await self.claim()

    def enter_step(self, name: str = "") -> None:
        self._in_flight += 1
        self._working[name] = self._working.get(name, 0) + 1

    def leave_step(self, name: str = "") -> None:
        self._in_flight -= 1
        left = self._working.get(name, 1) - 1
        if left:
            self._working[name] = left
        else:
            self._working.pop(name, None)
        if self._in_flight == 0 and self._idle is not None:
            self._idle.set()

    def abandon(self, name: str, thread: asyncio.Future[Any]) -> None:
        """A sync step's await was cancelled (the run was cancelled) while its thread still runs:
        a thread cannot be stopped, so the run is settling until ``thread`` finishes."""
        self._abandoned[thread] = name
        thread.add_done_callback(self._thread_done)

    def _thread_done(self, thread: asyncio.Future[Any]) -> None:
        self._abandoned.pop(thread, None)
        if not thread.cancelled():
            thread.exception()  # nobody awaits it any more: its error was the cancelled step's, not news

    def running(self) -> list[str]:
        """The names of the steps of this execution still running (those whose thread outlived a
        cancel included), sorted: what a cancel reports as still settling."""
        return sorted({*self._working, *self._abandoned.values()})

    async def threads_done(self) -> None:
        """Wait until every thread a cancel left running has finished."""
        while self._abandoned:
            await asyncio.wait(list(self._abandoned))

    async def settle(self, limit: float) -> None:
        """Let steps still running beside a park (``asyncio.gather`` siblings) finish and be journaled.

        No new step starts from here on. A step still running after ``limit`` seconds is left to
        the lease: its late commit is refused, and the resume runs it again.
        """
        self.stopping = True
        self._halt.set()
        if self._in_flight:
            self._idle = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), limit)

    def now(self) -> float:
        now: float = self._clock.time()
        return now

    async def backoff(self, seconds: float) -> bool:
        """Wait ``seconds`` before a step's next attempt; False, at once, if the execution stops
        meanwhile (cancelled, parked, lost), so the step journals nothing and runs again on resume."""
        if not (self.signal.is_set() or self.stopping) and seconds > 0:
            waits = [asyncio.ensure_future(self.signal.wait()), asyncio.ensure_future(self._halt.wait())]
            try:
                await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()
        return not (self.signal.is_set() or self.stopping)

    def before_step(self) -> None:
        """Called before new work: stop if cancelled, yield if the budget is spent."""
        if self.signal.is_set() or self.stopping:
            raise Cancelled()
        if self._budget is not None and self._new_steps and time.monotonic() - self._started >= self._budget:
            raise Yielded()

    async def commit(self, entry: JournalEntry, *events: dict[str, Any] | str) -> None:
        """Journal one finished piece of work with the events waiting for it: one transaction.

        Work a retry runs again is stored under its key for that retry (see :mod:`agent_unit._retries`).
        """
        if self.record.retry is not None:
            entry = JournalEntry(stored_key(entry.key, self.record.retry), entry.value, entry.error, entry.meta)
        self._new_steps += 1
        self._flush_due = None  # this commit takes the pending events: the timer, if any, finds nothing due
        # take/release, not ``async with``: its __aenter__ and __aexit__ are two coroutines per step.
        lock = self.lock
        if not lock.take():
            await lock.acquire()
        try:
            if self.deferred is not None:  # new work claims first (Run._journaled): only a defence
                await self.claim_held()
            await self.store.append(
                self.record.id, owner=self.owner, journal=(entry,), events=self.events.drain(*events)
            )
        except (LeaseLost, StoreUnavailable):
            # Lost, or the store is out of reach: stop here and save nothing. The lease lapses
            # and a sweep (here or anywhere) recovers the run from its journal.
            self.signal.set()
            raise Cancelled() from None
        except AgentUnitError:
            raise  # the store refused this write for good (too large, a duplicate key): the run fails
        except VALUE_ERRORS as exc:
            # The value, not the store: running the work again would write it again.
            raise StepResultError(f"{entry.key} cannot be stored: {exc}") from None
        except Exception:
            log.exception("journaling a step of run %s failed: the run is recovered from its journal", self.record.id)
            self.signal.set()
            raise Cancelled() from None
        finally:
            lock.release()
        self._notify(self.record.id)

    def schedule_flush(self, soon: bool = False, within: float | None = None) -> None:
        """Write pending events if no journal write takes them first.

        Text and tool-argument deltas wait up to ``delta_batch_ms`` so they merge; other
        events (``soon``) go at the loop's next turn; ``within`` names another wait (a step's
        STEP_STARTED waits ``agent_unit.run.STEP_STARTED_WAIT``). A flush already due sooner is kept.
        Either way a step that finishes before its flush carries the events in its own commit,
        so a fast step is one write.
        """
        delay = 0.0 if soon else self._batch_seconds if within is None else within
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        if self._flush_due is not None and self._flush_due <= due:
            return
        self._flush_due = due
        if self._flush is not None:
            if self._flush_at <= due:
                return  # the timer wakes first and waits on until the flush is due
            self._flush.cancel()
        self._arm(loop, due)

    def _arm(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        # call_later, never call_at: Pyodide's loop (a Worker's) refuses a time already past, and
        # "now" (a flush due at once) is past by the time it looks (ValueError failed the run).
        self._flush = loop.call_later(max(0.0, due - loop.time()), self._on_timer)
        self._flush_at = due

    def _on_timer(self) -> None:
        """The timer: flush if pending events are due, wait on if they are not yet, stop if a commit took them.

        A commit only forgets the due time and leaves the timer armed, so a run of fast steps
        arms one timer per wait rather than one per step (a timer is a heap entry, made and
        cancelled: a measurable share of a no-op step)."""
        self._flush = None
        due = self._flush_due
        if due is None:
            return
        loop = asyncio.get_running_loop()
        if due > loop.time():
            self._arm(loop, due)
            return
        self._flush_due = None
        task = asyncio.ensure_future(self.flush())
        self._flushing.add(task)
        task.add_done_callback(self._flushing.discard)

    def _cancel_flush(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        self._flush_due = None

    async def flush(self) -> None:
        async with self.lock:
            if self.events and not self.signal.is_set():
                if self.deferred is not None:
                    try:
                        await self.claim_held()
                    except Cancelled:
                        return
                try:
                    await self.store.append(self.record.id, owner=self.owner, events=self.events.drain())
                except (LeaseLost, StoreUnavailable):  # as in commit: the run is recovered from its journal
                    self.signal.set()
                    return
                except _REFUSED:  # these events cannot be stored: drop them, go on
                    log.exception("events of run %s cannot be stored; they are dropped", self.record.id)
                    return
                except Exception:
                    log.exception(
                        "writing events of run %s failed: the run is recovered from its journal", self.record.id
                    )
                    self.signal.set()
                    return
        self._notify(self.record.id)

    def close(self) -> None:
        self._cancel_flush()
        if self._claim_timer is not None:
            self._claim_timer.cancel()
            self._claim_timer = None
        self._halt.set()
        self.signal.set()
