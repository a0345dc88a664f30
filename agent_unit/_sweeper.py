"""The sweep and the timers: what wakes sleepers and recovers runs nobody is executing.

The sweep reads only the runs that are due (a wake time passed, a lease lapsed, retention
over); between sweeps, a timer per wake-up or lease that falls due before the next sweep
keeps a long-lived server on time. Kept apart from :class:`~agent_unit.RunEngine` so
the engine's commands read as what they change, and this as when things happen by themselves.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _events as ev
from . import telemetry
from ._cancelling import cancel_requested
from ._clock import to_datetime
from ._executor import Executor, maybe_await
from ._owners import owner_is_gone
from ._records import FINISHED, RunRecord, RunStatus
from ._settling import holder_gone
from .errors import AgentBroken, RunConflict, RunNotFound, StoreUnavailable

if TYPE_CHECKING:
    from ._engine import RunEngine

__all__ = ["SweepResult", "Sweeper"]

log = logging.getLogger("agent_unit")

_LEASED = (RunStatus.running, RunStatus.queued)
_LAPSE_MARGIN = 0.1  # seconds after a lease's expiry: a timer may fire a little early
_QUEUED_WHY = "it was waiting to continue (handed back at shutdown, or its continuation was lost)"


@dataclass
class SweepResult:
    woken: int = 0
    recovered: int = 0
    deleted: int = 0
    run_ids: tuple[str, ...] = ()


class Sweeper:
    """The sweep loop, the wake-up timers and the background tasks they start, for one engine.

    ``enabled``: this process sweeps by itself (a long-lived server); a serverless host calls
    :meth:`sweep` from its scheduler instead, and arms no timers.
    """

    def __init__(self, engine: RunEngine, executor: Executor, *, enabled: bool) -> None:
        self._engine = engine
        self._executor = executor
        self.enabled = enabled
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.background: set[asyncio.Task[Any]] = set()
        self.task: asyncio.Task[None] | None = None

    async def sweep(self, *, wait: bool = False, limit: int = 500, lapsing: bool = False) -> SweepResult:
        """:meth:`agent_unit.RunEngine.sweep`, which says what a sweep does and what ``lapsing`` arms."""
        now = self._engine.clock.time()
        started = time.monotonic()
        result = SweepResult()
        touched: list[str] = []
        for record in await self._engine.store.due_runs(before=now, limit=limit):
            if await self._sweep_one(record, result):
                touched.append(record.id)
        if not self._engine.clock.manual and self._engine.schedule_wake is None:
            touched += await self._look_ahead(now, result, limit=limit, lapsing=lapsing)
        result.run_ids = tuple(touched)
        observed = telemetry.active()
        if observed is not None:
            observed.swept(started, result.woken, result.recovered, result.deleted)
        if wait:
            for run_id in touched:
                await self._engine.wait(run_id)
        return result

    async def watch_leases(self, *, limit: int = 500) -> SweepResult:
        """Arm a timer for every wake and every other process's lease due before the next sweep,
        and recover at once the runs of a process of this machine that has ended.

        A long-lived server does this every half lease (:meth:`run_sweeps`), between its sweeps,
        so a run whose server died is recovered when its lease lapses, even if it started after
        the last sweep."""
        result = SweepResult()
        if not self._engine.clock.manual and self._engine.schedule_wake is None:
            result.run_ids = tuple(await self._look_ahead(self._engine.clock.time(), result, limit=limit, lapsing=True))
        return result

    async def _look_ahead(self, now: float, result: SweepResult, *, limit: int, lapsing: bool) -> list[str]:
        """Timers for what falls due before the next sweep; recover a dead local owner's runs now."""
        touched: list[str] = []
        for record in await self._engine.store.due_runs(before=now + self._engine.sweep_interval, limit=limit):
            if record.due_at is None or record.due_at <= now or record.id in self._executor.executions:
                continue
            if record.agent in self._engine.broken:
                continue  # its file does not load: nothing to wake or recover until it does
            if record.status in (RunStatus.sleeping, RunStatus.interrupted):  # a deadline wakes as a sleep does
                self.arm(record.id, record.due_at)
            elif record.settling is not None and not self._executor.ours(record):  # cancelled, steps elsewhere
                if owner_is_gone(record.lease_owner or ""):
                    if await self._sweep_one(record, result, owner_gone=True):
                        touched.append(record.id)
                elif lapsing:
                    self.arm(record.id, record.due_at + _LAPSE_MARGIN)
            elif self._executor.lapses(record) and owner_is_gone(record.lease_owner or ""):
                if await self._sweep_one(record, result, owner_gone=True):
                    touched.append(record.id)
            elif lapsing and self._executor.lapses(record):
                self.arm(record.id, record.due_at + _LAPSE_MARGIN)  # surely lapsed when it fires
        return touched

    async def _sweep_one(self, record: RunRecord, result: SweepResult, *, owner_gone: bool = False) -> bool:
        """Wake, recover or delete one run the sweep found; whether this engine took it."""
        if record.agent in self._engine.broken and record.status not in FINISHED:
            return False  # its file does not load: the run waits for the fix (never failed for it)
        try:
            if record.status == RunStatus.sleeping:
                await self._executor.claim(
                    record, events=(ev.run_started(record.id, record.thread_id, record.attempt),), kind="wake"
                )
                result.woken += 1
                log.info("woke run %s of agent %r: its wake time passed", record.id, record.agent)
            elif record.status == RunStatus.interrupted and record.interrupt and record.interrupt.expires_at:
                name = record.interrupt.name
                await self._engine.expire_now(record)
                result.woken += 1
                log.info("woke run %s of agent %r: nobody answered %r by its deadline", record.id, record.agent, name)
            elif record.status in _LEASED:
                if record.id in self._executor.executions:
                    return False  # ours and alive: its renewal is just late
                crashed = record.status == RunStatus.running
                await self._executor.claim(record, recovered=crashed, kind="recover" if crashed else "continue")
                result.recovered += 1
                if owner_gone:
                    why = "the process that held its lease on this machine has ended"
                else:
                    why = "its lease lapsed, so the process executing it stopped" if crashed else _QUEUED_WHY
                log.info("recovered run %s of agent %r: %s (attempt %d)", record.id, record.agent, why, record.attempt)
            elif record.status in FINISHED and record.settling is not None:
                now = self._engine.clock.time()
                if not holder_gone(record, now):
                    return False  # the process running its steps renewed its lease
                if self._executor.ours(record) and now < (record.lease_expires or now) + self._engine.lease_ttl:
                    return False  # this process, alive: its renewal is just late
                if not await self._executor.clear_settling(record):
                    return False
                why = "has ended" if owner_gone else "let its lease lapse"
                log.info("cancelled run %s settled: the process that ran its steps %s", record.id, why)
            elif record.status in FINISHED:
                await self._engine.store.delete_run(record.id)
                result.deleted += 1
                return False
            else:
                return False
        except (RunConflict, RunNotFound):
            return False  # another process got there first
        except StoreUnavailable:
            raise
        except Exception:  # one run the store refuses must not keep the sweep from every other
            log.exception("sweeping run %s failed; the next sweep tries again", record.id)
            return False
        return True

    async def run(self) -> None:
        """Sweep every ``sweep_interval`` until cancelled (a long-lived server's loop), and watch
        the leases of other processes every half lease between sweeps (:meth:`watch_leases`).

        The first sweep runs at once: a server that starts recovers what it can right away.
        """
        loop = asyncio.get_running_loop()
        period = min(self._engine.sweep_interval, self._engine.lease_ttl / 2)
        next_sweep = loop.time()
        while True:
            try:
                if loop.time() >= next_sweep:
                    next_sweep = loop.time() + self._engine.sweep_interval
                    await self.sweep(lapsing=True)
                else:
                    await self.watch_leases()
            except StoreUnavailable as exc:
                log.warning("agent-unit sweep: the store is out of reach (%s); trying again", exc)
            except Exception:
                log.exception("agent-unit sweep failed")
            if cancel_requested():  # the store's driver turned the cancellation into an error: stop anyway
                raise asyncio.CancelledError
            await asyncio.sleep(min(period, max(0.0, next_sweep - loop.time())))

    # -- timers --------------------------------------------------------------------------

    def arm(self, run_id: str, wake_at: float) -> None:
        """A timer for a wake-up due before the next sweep (later ones cost nothing until then)."""
        if self._engine.clock.manual or self._engine.schedule_wake is not None or not self.enabled:
            return  # a host that sweeps for us (serverless) runs nothing between its requests
        delay = max(0.0, wake_at - self._engine.clock.time())
        if delay > self._engine.sweep_interval:
            return
        self.disarm(run_id)
        self.timers[run_id] = asyncio.get_running_loop().call_later(delay, self._on_timer, run_id)

    def disarm(self, run_id: str) -> None:
        timer = self.timers.pop(run_id, None)
        if timer is not None:
            timer.cancel()

    def _on_timer(self, run_id: str) -> None:
        self.timers.pop(run_id, None)

        async def go() -> None:
            try:
                await self._look_again(run_id)
            except (RunConflict, RunNotFound, AgentBroken):
                pass  # woken elsewhere, cancelled or deleted; or its agent's file does not load
            except Exception as exc:  # noqa: BLE001 - the next sweep looks again
                log.warning("looking at run %s on its timer failed (%s): the next sweep looks again", run_id, exc)

        self._track(go())

    async def _look_again(self, run_id: str) -> None:
        """A timer fired: wake the sleeper, or recover the run whose lease lapsed, or follow a renewed lease."""
        record = await self._engine.get(run_id)
        if record.status in (RunStatus.sleeping, RunStatus.interrupted):
            await self._engine.wake(run_id)  # a sleeper, or an interrupt whose deadline passed
        elif record.settling is not None and record.due_at is not None and not self._executor.ours(record):
            if record.due_at <= self._engine.clock.time():
                await self._sweep_one(record, SweepResult())  # the settling steps' lease lapsed
            else:
                self.arm(run_id, record.due_at + _LAPSE_MARGIN)  # renewed: follow it
        elif record.status in _LEASED and record.due_at is not None and run_id not in self._executor.executions:
            if record.due_at <= self._engine.clock.time():
                await self._sweep_one(record, SweepResult())  # the lease lapsed: recover this run, from this read
            elif self._executor.lapses(record):
                self.arm(run_id, record.due_at + _LAPSE_MARGIN)  # renewed: follow it to its new expiry

    def _track(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def schedule(self, run_id: str, wake_at: float) -> None:
        """Arrange the wake-up of a run saved as sleeping; a hook that fails leaves it to the sweep."""
        if self._engine.schedule_wake is None:
            self.arm(run_id, wake_at)
            return
        try:
            await maybe_await(self._engine.schedule_wake(run_id, to_datetime(wake_at)))  # type: ignore[arg-type]
        except Exception:
            log.exception("schedule_wake failed for run %s; the sweep wakes it when it is due", run_id)

    def start(self) -> None:
        """Start the sweep loop on the running loop, unless it runs there already or is off."""
        if not self.enabled:
            return
        loop = asyncio.get_running_loop()
        if self.task is None or self.task.done() or self.task.get_loop() is not loop:
            self.task = loop.create_task(self.run(), name="agent-unit sweep")

    async def stop(self) -> None:
        """Stop the sweep loop and every timer (background tasks are awaited by the engine's close)."""
        if self.task is not None and self.task.get_loop() is asyncio.get_running_loop():
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        self.task = None
        for run_id in list(self.timers):
            self.disarm(run_id)
