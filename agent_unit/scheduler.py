"""The in-process scheduler of a server or container: each tick of each task runs exactly once.

Every server over one store runs this loop. At each tick of a task every server tries to claim
``(task, scheduled time)`` in the store (:meth:`Store.claim_tick`, an atomic insert-if-absent);
the one that wins runs the handler, the others do nothing. So a task due every minute runs once
a minute however many servers there are, and a server that restarts never runs a tick again.

Ticks missed while no server ran: when a scheduler starts, the most recent tick of each task
runs once if it is at most ``catch_up`` old (default one hour) and no server ran it; older
missed ticks are skipped, with a log line. A deploy that restarts every server around a tick
therefore does not lose it, and a server that was down for a day does not replay a day of ticks.

The clock is injectable: with a manual clock (:class:`agent_unit.clock.ManualClock`) nothing
runs by itself, and a test moves the clock and calls :meth:`Scheduler.tick`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from .clock import Clock, SystemClock
from .env import wait_until
from .ids import new_id
from .stores import Store
from .stores.protocol import TICK_MEMORY
from .tasks import Task, handler_error, last_tick, next_tick, run_task, tasks_from_config

__all__ = ["Scheduler", "run_host_tick"]

log = logging.getLogger("agent_unit.scheduler")


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
    ) -> None:
        self.tasks = tasks_from_config(tasks)
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{new_id('s')[-8:]}"
        if catch_up.total_seconds() >= TICK_MEMORY:
            raise ValueError(f"catch_up must be shorter than {TICK_MEMORY / 3600:.0f} hours (how long ticks are kept)")
        self.catch_up = catch_up
        self._handlers = {name: task.load() for name, task in self.tasks.items()}  # an import error shows at start
        self._seen: dict[str, datetime] = {}  # the latest tick of each task this scheduler has handled
        self._loop: asyncio.Task[None] | None = None

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock.time(), UTC)

    async def tick(self, *, wait: bool = False) -> list[tuple[str, datetime]]:
        """Claim and start every task whose latest tick is due and not handled yet.

        Returns the ``(task, scheduled time)`` ticks this process won; ``wait=True`` returns once
        their handlers have finished. Handlers run as ``wait_until`` work, so a graceful shutdown
        lets them finish.
        """
        now = self._now()
        won: list[tuple[str, datetime]] = []
        started: list[asyncio.Task[None]] = []
        for name, task in self.tasks.items():
            due = last_tick(task.schedule, now)
            if name in self._seen and due <= self._seen[name]:
                continue
            self._seen[name] = due
            if now - due > self.catch_up:
                log.info("task %s: the tick at %s was missed while no server ran: skipped", name, due.isoformat())
                continue
            if not await self.store.claim_tick(name, due.timestamp(), self.owner):
                continue  # another server runs it
            won.append((name, due))
            work = asyncio.ensure_future(self._run(task, due))
            wait_until(work, name=f"task {name} at {due.isoformat()}")
            started.append(work)
        if wait and started:
            await asyncio.wait(started)
        return won

    async def _run(self, task: Task, due: datetime) -> None:
        try:
            await run_task(task, due, self._handlers[task.name])
        except Exception as exc:  # noqa: BLE001 - a failing handler is logged; the next tick runs
            log.error("task %s (tick %s) failed:\n%s", task.name, due.isoformat(), handler_error(exc))

    def next_run(self) -> datetime | None:
        """When the next tick of any task is due."""
        now = self._now()
        return min((next_tick(task.schedule, now) for task in self.tasks.values()), default=None)

    async def run_forever(self) -> None:
        """Tick, then sleep until the next tick of any task, until cancelled."""
        while True:
            try:
                await self.tick()
            except Exception:
                log.exception("the scheduler could not claim its ticks: it tries again at the next one")
            following = self.next_run()
            if following is None:
                return
            await asyncio.sleep(max(0.0, following.timestamp() - self.clock.time()) + 0.01)

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


async def run_host_tick(task: Task, scheduled_at: datetime, store: Store | None, *, owner: str) -> dict[str, Any]:
    """Run one tick that a host's scheduler delivered (an EventBridge schedule, a Vercel cron).

    Hosts deliver at least once, so the tick is claimed in ``store`` first, as the in-process
    scheduler claims it: a repeated delivery runs nothing. A handler that raises is logged with
    its own traceback lines and reported, not raised: the claim is spent, as on a server.
    Returns ``{"task", "scheduled_at", "ran"}`` and ``"error"`` when the handler failed.
    """
    result: dict[str, Any] = {"task": task.name, "scheduled_at": scheduled_at.isoformat(), "ran": False}
    if store is not None and not await store.claim_tick(task.name, scheduled_at.timestamp(), owner):
        return result
    result["ran"] = True
    try:
        await run_task(task, scheduled_at)
    except Exception as exc:  # noqa: BLE001 - the user's handler: logged with its own lines
        log.error("task %s (tick %s) failed:\n%s", task.name, scheduled_at.isoformat(), handler_error(exc))
        result["error"] = f"{type(exc).__name__}: {exc}"
    return result
