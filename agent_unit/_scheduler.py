"""The in-process scheduler of a server or container: each tick of each task runs once, and
again only after a crash.

Every server over one store runs this loop. At each tick of a task every server tries to claim
``(task, scheduled time)`` in the store (:meth:`Store.claim_tick`, an atomic conditional
write); the one that wins runs the handler, the others do nothing. So a task due every minute
runs once a minute however many servers there are, and a server that restarts never runs a
finished tick again.

A claim is a lease: its holder renews it while the handler runs (every third of
:data:`TICK_LEASE`) and records the tick as done when the handler returns or raises (the
error is logged: a failing tick is not retried). A server killed mid-handler stops renewing;
once its lease lapses, the next scheduler to look (each looks at every tick of its tasks, and
at least once a lease) takes the tick over, exactly one of them, and runs the handler again. So
a handler runs at least once, and twice only after a crash: it must tolerate running again
for the same tick.

A store that cannot take the claim (down, or a file locked for a while) does not lose the
tick: the claim is tried again with backoff until the store answers or the tick is older
than ``catch_up``.

Ticks missed while no server ran: when a scheduler starts, the most recent tick of each task
runs once if it is at most ``catch_up`` old (default one hour) and no server ran it; older
missed ticks are skipped, with a log line. A deploy that restarts every server around a tick
therefore does not lose it, and a server that was down for a day does not replay a day of ticks.
Ticks missed while the store was unavailable follow the same rule: the latest one runs.

The clock is injectable: with a manual clock (:class:`agent_unit._clock.ManualClock`) nothing
runs by itself, and a test moves the clock and calls :meth:`Scheduler.tick`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ._clock import Clock, SystemClock
from ._ids import new_id
from ._tasks import Task, handler_error, last_tick, next_tick, run_task, tasks_from_config
from .env import wait_until
from .errors import StoreUnavailable
from .stores import Store
from .stores.protocol import TICK_MEMORY

__all__ = ["TICK_LEASE", "Scheduler", "run_claimed_tick", "run_host_tick"]

log = logging.getLogger("agent_unit.scheduler")

TICK_LEASE = timedelta(seconds=60)
"""How long a tick's claim lasts unless renewed: a tick whose server died runs again this long after."""

_FIRST_RETRY = 1.0
_LONGEST_RETRY = 30.0
"""Seconds between tries of a claim the store could not take: doubling from the first to the longest."""


class Scheduler:
    """Runs ``tasks`` on their schedules, claiming each tick in ``store`` first."""

    def __init__(
        self,
        tasks: Mapping[str, Any],
        store: Store,
        *,
        clock: Clock | None = None,
        owner: str | None = None,
        catch_up: timedelta = timedelta(hours=1),
        lease: timedelta = TICK_LEASE,
    ) -> None:
        self.tasks = tasks_from_config(tasks)
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{new_id('s')[-8:]}"
        if catch_up.total_seconds() >= TICK_MEMORY:
            raise ValueError(f"catch_up must be shorter than {TICK_MEMORY / 3600:.0f} hours (how long ticks are kept)")
        self.catch_up = catch_up
        self.lease = lease
        self._handlers = {name: task.load() for name, task in self.tasks.items()}  # an import error shows at start
        self._seen: dict[str, datetime] = {}  # the latest tick of each task this scheduler has considered
        self._pending: dict[str, datetime] = {}  # a task's latest tick, until the store answers its claim
        self._running: set[tuple[str, float]] = set()  # the ticks whose handlers run here now
        self._unavailable = False  # the store failed at the last tick: one warning per outage
        self._loop: asyncio.Task[None] | None = None

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock.time(), UTC)

    async def tick(self, *, wait: bool = False) -> list[tuple[str, datetime]]:
        """Claim and start every tick that is due and not handled yet, and every tick whose
        claimant's lease lapsed before it finished (within ``catch_up``).

        Returns the ``(task, scheduled time)`` ticks this process won; ``wait=True`` returns once
        their handlers have finished. Handlers run as ``wait_until`` work, so a graceful shutdown
        lets them finish. A store that cannot answer is logged, not raised: the tick stays
        pending (:attr:`retrying`) and the next call claims it.
        """
        now = self._now()
        won: list[tuple[str, datetime]] = []
        unavailable: StoreUnavailable | None = None
        for name, task in self.tasks.items():
            try:
                due = self._pending_tick(name, task, now)
                if due is not None:
                    claimed = await self._claim(name, due, now)
                    del self._pending[name]  # the store answered: won, or another server runs it
                    if claimed:
                        won.append((name, due))
                since = (now - self.catch_up).timestamp()
                for at in await self.store.lapsed_ticks(name, since=since, now=now.timestamp()):
                    lapsed = datetime.fromtimestamp(at, UTC)
                    if (name, at) in self._running or not await self._claim(name, lapsed, now):
                        continue
                    log.warning(
                        "task %s: the server that claimed the tick at %s stopped before it finished: running it again",
                        name,
                        lapsed.isoformat(),
                    )
                    won.append((name, lapsed))
            except StoreUnavailable as exc:
                unavailable = exc
        self._report(unavailable)
        started = [self._start(self.tasks[name], due) for name, due in won]
        if wait and started:
            await asyncio.wait(started)
        return won

    @property
    def retrying(self) -> bool:
        """True while the store failed at the last tick: the loop tries again soon, not at the next tick."""
        return self._unavailable

    def _pending_tick(self, name: str, task: Task, now: datetime) -> datetime | None:
        """The tick of ``task`` to claim now: its latest, once, until the store answers the claim."""
        due = last_tick(task.schedule, now)
        if name not in self._seen or due > self._seen[name]:
            self._seen[name] = due
            missed = self._pending.pop(name, None)
            if missed is not None:
                log.warning(
                    "task %s: the tick at %s was never claimed (the store was unavailable): skipped for the one at %s",
                    name,
                    missed.isoformat(),
                    due.isoformat(),
                )
            if now - due > self.catch_up:
                log.info("task %s: the tick at %s was missed while no server ran: skipped", name, due.isoformat())
            else:
                self._pending[name] = due
        pending = self._pending.get(name)
        if pending is not None and now - pending > self.catch_up:
            log.warning(
                "task %s: the tick at %s was never claimed: the store was unavailable for longer than catch_up (%s)",
                name,
                pending.isoformat(),
                self.catch_up,
            )
            del self._pending[name]
            return None
        return pending

    async def _claim(self, name: str, due: datetime, now: datetime) -> bool:
        expires = (now + self.lease).timestamp()
        return await self.store.claim_tick(name, due.timestamp(), self.owner, now=now.timestamp(), expires=expires)

    def _report(self, unavailable: StoreUnavailable | None) -> None:
        """One warning when the store starts failing, one line when it answers again."""
        if unavailable is not None and not self._unavailable:
            pending = ", ".join(f"{name} at {due.isoformat()}" for name, due in self._pending.items())
            log.warning(
                "the scheduler cannot use the store (%s): it tries again until the store answers%s",
                unavailable,
                f"; waiting to be claimed: {pending}" if pending else "",
            )
        elif unavailable is None and self._unavailable:
            log.info("the scheduler can use the store again")
        self._unavailable = unavailable is not None

    def _start(self, task: Task, due: datetime) -> asyncio.Task[None]:
        work = asyncio.ensure_future(self._run(task, due))
        wait_until(work, name=f"task {task.name} at {due.isoformat()}")
        return work

    async def _run(self, task: Task, due: datetime) -> None:
        ran = (task.name, due.timestamp())
        self._running.add(ran)
        try:
            handler = self._handlers[task.name]
            await run_claimed_tick(
                self.store, task, due, self.owner, clock=self.clock, lease=self.lease, handler=handler
            )
        finally:
            self._running.discard(ran)

    def next_run(self) -> datetime | None:
        """When the next tick of any task is due."""
        now = self._now()
        return min((next_tick(task.schedule, now) for task in self.tasks.values()), default=None)

    async def run_forever(self) -> None:
        """Tick, then sleep until the next tick of any task, until cancelled.

        The loop also wakes once a lease, to take over ticks whose server died, and, while the
        store fails, after a backoff (doubling up to half a minute) to claim the pending ticks.
        """
        retry = _FIRST_RETRY
        while True:
            try:
                await self.tick()
                failed = self.retrying
            except Exception:
                log.exception("the scheduler failed to tick: it tries again in %g s", retry)
                failed = True
            following = self.next_run()
            if following is None:
                return
            now = self.clock.time()
            wake = min(following.timestamp(), now + self.lease.total_seconds())
            if failed:
                wake = min(wake, now + retry)
                retry = min(retry * 2, _LONGEST_RETRY)
            else:
                retry = _FIRST_RETRY
            await asyncio.sleep(max(0.0, wake - self.clock.time()) + 0.01)

    def start(self) -> None:
        """Start the loop on the running event loop (a server's lifespan calls this); not with a manual clock."""
        if self.clock.manual or not self.tasks:
            return
        if self._loop is None or self._loop.done():
            self._loop = asyncio.get_running_loop().create_task(self.run_forever(), name="agent-unit scheduler")

    async def stop(self) -> None:
        """Stop ticking; handlers already running are ``wait_until`` work, which the shutdown drains."""
        if self._loop is not None:
            self._loop.cancel()
            await asyncio.gather(self._loop, return_exceptions=True)
            self._loop = None


async def run_claimed_tick(
    store: Store,
    task: Task,
    due: datetime,
    owner: str,
    *,
    clock: Clock,
    lease: timedelta = TICK_LEASE,
    handler: Callable[..., Any] | None = None,
) -> Exception | None:
    """Run the handler of a tick that ``owner`` claimed: renew the claim while it runs, and
    record the tick as done once it returns or raises. Returns what it raised (logged here with
    the user's own traceback lines), or None.

    A cancelled handler (a shutdown that could not wait) leaves the tick unfinished: its claim
    lapses and another server runs it again.
    """
    at = due.timestamp()
    renewing = asyncio.ensure_future(_renew(store, task.name, at, owner, clock, lease))
    try:
        error = await _run_handler(task, due, handler)
        await _finish(store, task.name, due, owner, lease)
    finally:
        renewing.cancel()
    return error


async def _run_handler(task: Task, due: datetime, handler: Callable[..., Any] | None = None) -> Exception | None:
    """Run the tick's handler; what it raised (logged here with the user's own traceback lines), or None."""
    try:
        await run_task(task, due, handler)
    except Exception as exc:  # noqa: BLE001 - the user's handler: logged with its own lines
        log.error("task %s (tick %s) failed:\n%s", task.name, due.isoformat(), handler_error(exc))
        return exc
    return None


async def _renew(store: Store, name: str, at: float, owner: str, clock: Clock, lease: timedelta) -> None:
    """Renew the claim every third of the lease while the handler runs (a renewal the store
    could not take is tried at the next one: the lease outlasts two)."""
    while True:
        await asyncio.sleep(lease.total_seconds() / 3)
        try:
            held = await store.renew_tick(name, at, owner, expires=clock.time() + lease.total_seconds())
        except StoreUnavailable:
            continue
        if not held:
            log.warning(
                "task %s: the claim on the tick at %s lapsed while its handler ran (the store could not renew it "
                "in time): another server may run it again",
                name,
                datetime.fromtimestamp(at, UTC).isoformat(),
            )
            return


async def _finish(store: Store, name: str, due: datetime, owner: str, lease: timedelta) -> None:
    """Record the tick as done, trying again while the store is unavailable, for up to a lease."""
    wait, waited = _FIRST_RETRY, 0.0
    while True:
        try:
            await store.finish_tick(name, due.timestamp(), owner)
            return
        except StoreUnavailable:
            if waited >= lease.total_seconds():
                log.warning(
                    "task %s: the tick at %s ran, but the store could not record it as done: "
                    "another server may run it again",
                    name,
                    due.isoformat(),
                )
                return
        await asyncio.sleep(wait)
        waited += wait
        wait = min(wait * 2, _LONGEST_RETRY)


async def run_host_tick(task: Task, scheduled_at: datetime, store: Store | None, *, owner: str) -> dict[str, Any]:
    """Run one tick that a host's scheduler delivered (an EventBridge schedule, a Vercel cron).

    Hosts deliver at least once, so the tick is claimed in ``store`` first, as the in-process
    scheduler claims it: a repeated delivery runs nothing, unless the invocation that claimed
    the tick died before it finished and its lease lapsed. A handler that raises is logged with
    its own traceback lines and reported, not raised: the tick is done, as on a server.
    Returns ``{"task", "scheduled_at", "ran"}`` and ``"error"`` when the handler failed.
    """
    result: dict[str, Any] = {"task": task.name, "scheduled_at": scheduled_at.isoformat(), "ran": False}
    if store is None:
        error = await _run_handler(task, scheduled_at)
    else:
        clock = SystemClock()
        claimant = f"{owner}:{new_id('t')[-8:]}"  # each delivery a claimant of its own, renewing only its claim
        now = clock.time()
        expires = now + TICK_LEASE.total_seconds()
        if not await store.claim_tick(task.name, scheduled_at.timestamp(), claimant, now=now, expires=expires):
            return result
        error = await run_claimed_tick(store, task, scheduled_at, claimant, clock=clock)
    result["ran"] = True
    if error is not None:
        result["error"] = f"{type(error).__name__}: {error}"
    return result
