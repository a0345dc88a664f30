"""``RunEngine``: every state change of a run, and where each execution happens.

Each change is a compare-and-set save on the run's version, so two processes racing to
resume, cancel or wake a run cannot both win; the loser gets ``RunConflict`` (HTTP 409).
An executor holds the run's lease while it works and renews it; the sweep recovers runs
whose lease lapsed, wakes due sleepers and deletes runs past their retention, reading only
the runs that are due.

A parked run costs nothing here: no task, no timer (unless it wakes before the next
sweep), no memory. Everything about it is in the store.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import json
import logging
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from . import events as ev
from . import jsontext
from .agent import Agent
from .answers import check_answer
from .clock import Clock, SystemClock, to_datetime
from .durations import Duration, parse_duration
from .errors import (
    VALUE_ERRORS,
    AgentBroken,
    AgentNotFound,
    AgentUnitError,
    InvalidArgument,
    InvalidInput,
    LeaseLost,
    NotInterrupted,
    RunConflict,
    RunNotFound,
    StoreUnavailable,
    UnstorableValue,
)
from .execution import Execution
from .host import SERVER, Host, OnContinue, ScheduleWake
from .ids import new_id
from .owners import owner_is_gone, process_owner
from .parks import Cancelled, Interrupted, Park, Sleeping, Yielded
from .reads import RunReads
from .records import (
    FINISHED,
    ErrorFrame,
    JournalEntry,
    RunError,
    RunPage,
    RunRecord,
    RunStatus,
    StoredEvent,
    agui_usage,
    record_usage,
)
from .run import Run, active_run
from .scheduler import Scheduler
from .stores import Store, open_store
from .tail import EventTail
from .tasks import Task
from .tracebacks import user_frames

__all__ = ["RunEngine", "SweepResult"]

log = logging.getLogger("agent_unit")

# A write refused for what it holds (not JSON, not UTF-8, too large): never a store outage.
_REFUSED: tuple[type[BaseException], ...] = (AgentUnitError, *VALUE_ERRORS)


MAX_THREAD_ID = 256


@dataclass
class SweepResult:
    woken: int = 0
    recovered: int = 0
    deleted: int = 0
    run_ids: tuple[str, ...] = ()


def _resolve_agents(agents: Mapping[str, Any], adapters: Sequence[Any]) -> dict[str, Agent]:
    """Every value as an :class:`Agent`, named after its key; framework agents go through adapters."""
    resolved: dict[str, Agent] = {}
    candidates: list[Any] | None = None
    for name, value in agents.items():
        if not isinstance(value, Agent):
            from .adapters import adapters as find_adapters
            from .adapters import resolve_agent

            candidates = candidates if candidates is not None else find_adapters(adapters)
            value = resolve_agent(name, value, candidates)
            if value is None:
                kind = type(agents[name]).__name__
                raise TypeError(
                    f"agent {name!r} is a {kind}, which no adapter recognises: use define_agent(...), "
                    "or install the adapter for its framework (agent-unit add <package>)"
                )
        if value.name is None:
            value.name = name
        resolved[name] = value
    return resolved


def _seconds(value: Duration | None) -> float | None:
    return None if value is None else parse_duration(value).total_seconds()


async def _maybe_await(value: Awaitable[None] | None) -> None:
    if inspect.isawaitable(value):
        await value


class RunEngine(RunReads):
    """Starts, executes, parks, wakes and recovers runs over one store.

    ``host`` (:class:`~agent_unit.host.Host`, default a long-lived server's) says how a yielded
    run continues, how wake-ups are scheduled and who sweeps; ``on_continue``,
    ``schedule_wake`` and ``background_sweep`` given here override its answers.
    ``budget``: yield at the next step boundary after this long and continue in a fresh
    execution (``on_continue(run_id)`` hands it to the host; in-process otherwise).
    ``schedule_wake(run_id, at)``: hand wake-ups to another scheduler instead of timers.
    ``background_sweep``: sweep every ``sweep_interval`` in this process (from the first
    execution, or ``start_background()``); turn it off where a host scheduler sweeps.
    ``agents`` may hold framework agents: they run through the first matching adapter
    (``adapters``, references like ``"pkg.mod:adapter"``, then installed ones).
    ``broken``: agents of the project whose file does not load (``agent-unit dev`` serves the
    others), each with its :class:`~agent_unit.errors.AgentBroken`. Starting or resuming one
    raises it; the sweep and timers leave its runs as they are, so they go on once it loads.
    What a protocol reads besides ``get``, ``list`` and ``events`` (a run's last seq, its
    journaled values, a health ping) is in :class:`~agent_unit.reads.RunReads`: nothing
    above the engine reads its ``store``.
    """

    def __init__(
        self,
        agents: Mapping[str, Any],
        store: Store | str | None = None,
        *,
        clock: Clock | None = None,
        budget: Duration | None = None,
        lease_ttl: Duration = "30s",
        sweep_interval: Duration = "60s",
        retention: Duration | None = None,
        delta_batch_ms: int = 50,
        max_step_bytes: int = 256 * 1024,
        host: Host | None = None,
        schedule_wake: ScheduleWake | None = None,
        on_continue: OnContinue | None = None,
        background_sweep: bool | None = None,
        owner: str | None = None,
        adapters: Sequence[Any] = (),
        broken: Mapping[str, AgentBroken] | None = None,
    ) -> None:
        self.agents = _resolve_agents(agents, adapters)
        self.broken: dict[str, AgentBroken] = dict(broken or {})
        self._owns_store = not isinstance(store, Store)
        self.store: Store = store if isinstance(store, Store) else open_store(store)
        self.clock: Clock = clock or SystemClock()
        self.budget = _seconds(budget)
        self.lease_ttl = _seconds(lease_ttl) or 30.0
        self.sweep_interval = _seconds(sweep_interval) or 60.0
        self.retention = _seconds(retention)
        self.delta_batch_ms = delta_batch_ms
        self.max_step_bytes = max_step_bytes
        self.host: Host = host or SERVER
        self.schedule_wake = schedule_wake if schedule_wake is not None else self.host.schedule_wake
        self.on_continue = on_continue if on_continue is not None else self.host.on_continue()
        self.owner = owner or process_owner("x")
        self.tail = EventTail(self.store)
        self._store_checked = False
        self._executions: dict[str, tuple[asyncio.Task[None], Execution]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._background: set[asyncio.Task[Any]] = set()
        # A long-lived process sweeps by itself (from its first execution on); a serverless
        # host (Host(sweep="scheduled")) calls sweep() from its scheduler instead.
        sweeps = self.host.background_sweep if background_sweep is None else background_sweep
        self._sweeps = sweeps and not self.clock.manual
        self._sweeper: asyncio.Task[None] | None = None

    # -- reading -------------------------------------------------------------------------

    async def get(self, run_id: str) -> RunRecord:
        record = await self.find(run_id)
        if record is None:
            raise RunNotFound(f"run {jsontext.shown(run_id)} does not exist")
        return record

    async def list(
        self,
        *,
        status: RunStatus | str | None = None,
        agent: str | None = None,
        thread_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> RunPage:
        if status is not None:
            try:
                status = RunStatus(status)
            except ValueError:
                raise InvalidArgument(
                    f"unknown status {jsontext.shown(status)}: use one of {', '.join(s.value for s in RunStatus)}"
                ) from None
        _check_thread_id(thread_id)
        if agent is not None and not jsontext.storable_name(agent):
            raise InvalidArgument(f"no agent can be named {jsontext.shown(agent)}")
        return await self.store.list_runs(status=status, agent=agent, thread_id=thread_id, limit=limit, cursor=cursor)

    async def events(self, run_id: str, *, after: int = 0, limit: int | None = None) -> builtins.list[StoredEvent]:
        if not jsontext.storable_name(run_id):
            raise RunNotFound(f"run {jsontext.shown(run_id)} does not exist")
        return await self.store.read_events(run_id, after=after, limit=limit)

    def executing(self) -> dict[str, asyncio.Task[None]]:
        """The task executing each run in this process, by run id (a copy: it does not change under you).

        For a host that must not end its invocation while runs still execute (Vercel's
        ``wait_until``), and for shutdown code that awaits or cancels them. A run parked or
        executing elsewhere is not here; its record in the store says where it stands.
        """
        return {run_id: task for run_id, (task, _) in self._executions.items()}

    async def wait(self, run_id: str) -> RunRecord:
        """Wait for this process's execution of the run (and its continuations) to stop."""
        while (running := self._executions.get(run_id)) is not None:
            task = running[0]
            if task.done():
                self._forget(run_id, task)
            else:
                await asyncio.wait([task])
        return await self.get(run_id)

    # -- changing ------------------------------------------------------------------------

    def check_agent(self, agent: str) -> None:
        """Raise :class:`~agent_unit.errors.AgentBroken` if ``agent``'s file does not load (see ``broken``)."""
        broken = self.broken.get(agent)
        if broken is not None:
            raise AgentBroken(
                f"agent {agent!r} cannot run until its file is fixed: {broken.message}", details=broken.details
            )

    def agent(self, name: str) -> Agent:
        """The agent a run of ``name`` would run: ``AgentBroken`` (503) if its file does not load,
        ``AgentNotFound`` (404, naming the agents there are) if there is none."""
        self.check_agent(name)
        definition = self.agents.get(name)
        if definition is None:
            known = ", ".join(sorted(self.agents)) or "none"
            raise AgentNotFound(f"no agent named {jsontext.shown(name)} (agents: {known})")
        return definition

    async def start(self, agent: str, input: Any, *, thread_id: str | None = None, wait: bool = False) -> RunRecord:
        """Create a run and execute it; with ``wait``, return once it parks or ends."""
        definition = self.agent(agent)
        _check_thread_id(thread_id)
        stored = _stored_input(definition, agent, input)
        now = self.clock.time()
        moment = to_datetime(now)
        record = RunRecord(
            id=new_id("run"),
            agent=agent,
            thread_id=thread_id or new_id("thread"),
            status=RunStatus.running,
            input=stored,
            created_at=moment,  # type: ignore[arg-type]
            updated_at=moment,  # type: ignore[arg-type]
            version=1,
            lease_owner=self._lease_token(),
            lease_expires=now + self.lease_ttl,
            due_at=now + self.lease_ttl,
        )
        await self.store.create_run(
            record, events=[ev.dumps(ev.run_started(record.id, record.thread_id, record.attempt))]
        )
        self.tail.notify(record.id)
        self._spawn(record, fresh=True)
        return await self.wait(record.id) if wait else record.model_copy()

    async def resume(
        self, run_id: str, answer: Any, *, wait: bool = False, interrupt_key: str | None = None
    ) -> RunRecord:
        """Answer an interrupted run and execute it on. The answer must fit the interrupt's schema.

        ``interrupt_key``: the interrupt the answer was given for. If the run has moved on to
        another one meanwhile, the answer is refused (409) instead of landing on the wrong one;
        the check and the save are one compare-and-set.
        """
        record = await self.get(run_id)
        if record.status != RunStatus.interrupted or record.interrupt is None:
            raise NotInterrupted(f"run {run_id} is {record.status.value}, not interrupted: there is nothing to resume")
        _check_interrupt(record, interrupt_key)
        entry = JournalEntry(record.interrupt.key, check_answer(record, answer, limit=self.max_step_bytes))
        await self._claim(
            record, journal=(entry,), events=(ev.run_started(record.id, record.thread_id, record.attempt),)
        )
        return await self.wait(run_id) if wait else record

    async def send(self, run_id: str, value: Any, *, message_id: str | None = None) -> RunRecord:
        """Deliver a message to a run that has not finished; the agent reads it with ``run.messages()``.

        The message is stored as the run's ``agent-unit.message`` CUSTOM event (durable, in its
        history), by a compare-and-set that changes nothing else, so it lands whether the run is
        executing on any server, sleeping or parked. It does not wake a sleeping run.
        """
        try:
            _, size = jsontext.encode(value)
        except ValueError as exc:
            raise UnstorableValue(f"the message cannot be stored as JSON: {exc}") from None
        if size > self.max_step_bytes:
            raise UnstorableValue(
                f"the message is {size:,} bytes of JSON, over max_step_bytes ({self.max_step_bytes:,})"
            )
        event = ev.dumps(ev.custom(ev.MESSAGE, {"messageId": message_id or new_id("msg"), "value": value}))
        while True:
            record = await self.get(run_id)
            if record.finished:
                raise RunConflict(f"run {run_id} is {record.status.value}: it takes no more messages")
            expected = record.version
            try:
                await self.store.save_run(record, expected_version=expected, events=[event])
            except RunConflict:
                continue  # a lease renewal, a park or a step: read it again
            record.version = expected + 1
            break
        self.tail.notify(run_id)
        return record

    async def wake(self, run_id: str, *, wait: bool = False) -> RunRecord:
        """Wake a sleeping run whose time has come (a timer, the sweep or ``schedule_wake``)."""
        record = await self.get(run_id)
        if record.status != RunStatus.sleeping:
            raise RunConflict(f"run {run_id} is {record.status.value}, not sleeping")
        if record.due_at is not None and record.due_at > self.clock.time():
            self._arm(run_id, record.due_at)
            return record
        try:
            await self._claim(record, events=(ev.run_started(record.id, record.thread_id, record.attempt),))
        except RunConflict:
            again = await self.get(run_id)
            if again.status != RunStatus.sleeping:
                raise  # woken elsewhere, cancelled or deleted
            return await self.wake(run_id, wait=wait)  # changed by a message (send): still asleep
        return await self.wait(run_id) if wait else record

    async def continue_run(self, run_id: str, *, wait: bool = False) -> RunRecord:
        """Continue a run that yielded at its budget."""
        record = await self.get(run_id)
        if record.status != RunStatus.queued:
            raise RunConflict(f"run {run_id} is {record.status.value}, not waiting to continue")
        await self._claim(record)
        return await self.wait(run_id) if wait else record

    async def cancel(self, run_id: str, *, interrupt_key: str | None = None) -> RunRecord:
        """Cancel a queued, running, interrupted or sleeping run (``interrupt_key``: only while it
        still waits at that interrupt)."""
        while True:
            record = await self.get(run_id)
            if record.finished:
                raise RunConflict(f"run {run_id} is already {record.status.value}")
            if interrupt_key is not None:
                _check_interrupt(record, interrupt_key)
            expected = record.version
            self._finish(record, RunStatus.cancelled)
            try:
                await self.store.save_run(
                    record, expected_version=expected, events=[ev.dumps(ev.run_cancelled(record.id, record.thread_id))]
                )
            except RunConflict:
                continue  # changed under us (a lease renewal, a park): look again
            record.version = expected + 1
            break
        self.tail.notify(run_id)
        self._disarm(run_id)
        self._stop(run_id, "cancelled")
        return record

    async def delete(self, run_id: str) -> None:
        """Delete a finished run with its journal and events."""
        record = await self.get(run_id)
        if not record.finished:
            raise RunConflict(f"run {run_id} is {record.status.value}: cancel it before deleting it")
        await self.store.delete_run(run_id)

    async def run_tick(self, task: Task, scheduled_at: datetime, *, owner: str | None = None) -> dict[str, Any]:
        """Run one tick of a scheduled ``task`` that a host's scheduler delivered, claimed in this
        engine's store under ``owner`` (default the engine's; see
        :func:`agent_unit.scheduler.run_host_tick`): a host runs its ticks through the engine and
        never reads the store itself."""
        from .scheduler import run_host_tick

        return await run_host_tick(task, scheduled_at, self.store, owner=owner or self.owner)

    async def sweep(self, *, wait: bool = False, limit: int = 500, lapsing: bool = False) -> SweepResult:
        """Wake due sleepers, recover runs whose lease lapsed, delete runs past retention.

        A run whose lease is held by a process of this machine that has ended (a server killed
        and started again) is recovered at once, without waiting for the lease to lapse (see
        :func:`agent_unit.owners.owner_is_gone`). ``lapsing``: also arm a timer for each lease
        that lapses before the next sweep, so the run is recovered when its lease lapses, not at
        the next sweep (a long-lived server's sweeps do; a timer that finds the lease renewed
        follows it to its new expiry).
        """
        now = self.clock.time()
        result = SweepResult()
        touched: list[str] = []
        for record in await self.store.due_runs(before=now, limit=limit):
            if await self._sweep_one(record, result):
                touched.append(record.id)
        if not self.clock.manual and self.schedule_wake is None:
            touched += await self._look_ahead(now, result, limit=limit, lapsing=lapsing)
        result.run_ids = tuple(touched)
        if wait:
            for run_id in touched:
                await self.wait(run_id)
        return result

    async def watch_leases(self, *, limit: int = 500) -> SweepResult:
        """Arm a timer for every wake and every other process's lease due before the next sweep,
        and recover at once the runs of a process of this machine that has ended.

        A long-lived server does this every half lease (:meth:`run_sweeps`), between its sweeps,
        so a run whose server died is recovered when its lease lapses, even if it started after
        the last sweep."""
        result = SweepResult()
        if not self.clock.manual and self.schedule_wake is None:
            result.run_ids = tuple(await self._look_ahead(self.clock.time(), result, limit=limit, lapsing=True))
        return result

    async def _look_ahead(self, now: float, result: SweepResult, *, limit: int, lapsing: bool) -> builtins.list[str]:
        """Timers for what falls due before the next sweep; recover a dead local owner's runs now."""
        touched: builtins.list[str] = []
        for record in await self.store.due_runs(before=now + self.sweep_interval, limit=limit):
            if record.due_at is None or record.due_at <= now or record.id in self._executions:
                continue
            if record.agent in self.broken:
                continue  # its file does not load: nothing to wake or recover until it does
            if record.status == RunStatus.sleeping:
                self._arm(record.id, record.due_at)
            elif self._lapses(record) and owner_is_gone(record.lease_owner or ""):
                if await self._sweep_one(record, result, owner_gone=True):
                    touched.append(record.id)
            elif lapsing and self._lapses(record):
                self._arm(record.id, record.due_at + _LAPSE_MARGIN)  # surely lapsed when it fires
        return touched

    async def _sweep_one(self, record: RunRecord, result: SweepResult, *, owner_gone: bool = False) -> bool:
        """Wake, recover or delete one run the sweep found; whether this engine took it."""
        if record.agent in self.broken and record.status not in FINISHED:
            return False  # its file does not load: the run waits for the fix (never failed for it)
        try:
            if record.status == RunStatus.sleeping:
                await self._claim(record, events=(ev.run_started(record.id, record.thread_id, record.attempt),))
                result.woken += 1
                log.info("woke run %s of agent %r: its wake time passed", record.id, record.agent)
            elif record.status in _LEASED:
                if record.id in self._executions:
                    return False  # ours and alive: its renewal is just late
                crashed = record.status == RunStatus.running
                await self._claim(record, recovered=crashed)
                result.recovered += 1
                if owner_gone:
                    why = "the process that held its lease on this machine has ended"
                else:
                    why = "its lease lapsed, so the process executing it stopped" if crashed else _QUEUED_WHY
                log.info("recovered run %s of agent %r: %s (attempt %d)", record.id, record.agent, why, record.attempt)
            elif record.status in FINISHED:
                await self.store.delete_run(record.id)
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

    async def run_sweeps(self) -> None:
        """Sweep every ``sweep_interval`` until cancelled (a long-lived server's loop), and watch
        the leases of other processes every half lease between sweeps (:meth:`watch_leases`).

        The first sweep runs at once: a server that starts recovers what it can right away.
        """
        loop = asyncio.get_running_loop()
        period = min(self.sweep_interval, self.lease_ttl / 2)
        next_sweep = loop.time()
        while True:
            try:
                if loop.time() >= next_sweep:
                    next_sweep = loop.time() + self.sweep_interval
                    await self.sweep(lapsing=True)
                else:
                    await self.watch_leases()
            except StoreUnavailable as exc:
                log.warning("agent-unit sweep: the store is out of reach (%s); trying again", exc)
            except Exception:
                log.exception("agent-unit sweep failed")
            await asyncio.sleep(min(period, max(0.0, next_sweep - loop.time())))

    async def check_store(self) -> None:
        """Reach the store once (a shared store's ``check()``), so bad configuration fails at start."""
        check = getattr(self.store, "check", None)
        if check is not None and not self._store_checked:
            await check()
            self._store_checked = True

    def scheduler(self, tasks: Mapping[str, Any]) -> Scheduler:
        """An in-process :class:`~agent_unit.scheduler.Scheduler` of ``tasks`` (``{name: {"schedule",
        "handler"}}``) on this engine's clock, claiming each tick in its store."""
        return Scheduler(tasks, self.store, clock=self.clock)

    def start_background(self) -> None:
        """Start the sweep loop now (a server calls this at startup, so sleepers wake on time)."""
        if not self._sweeps:
            return
        loop = asyncio.get_running_loop()
        if self._sweeper is None or self._sweeper.done() or self._sweeper.get_loop() is not loop:
            self._sweeper = loop.create_task(self.run_sweeps(), name="agent-unit sweep")

    async def aclose(self) -> None:
        """Stop local executions (their runs are released for another process), timers and sweeps."""
        if self._sweeper is not None and self._sweeper.get_loop() is asyncio.get_running_loop():
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
        self._sweeper = None
        for run_id in list(self._timers):
            self._disarm(run_id)
        tasks = [task for task, _ in self._executions.values()]
        for run_id in list(self._executions):
            self._stop(run_id, "shutdown")
        await asyncio.gather(*tasks, *self._background, return_exceptions=True)
        if self._owns_store:
            await self.store.close()

    # -- executing -----------------------------------------------------------------------

    async def _claim(
        self,
        record: RunRecord,
        *,
        journal: tuple[JournalEntry, ...] = (),
        events: tuple[dict[str, Any], ...] = (),
        recovered: bool = False,
    ) -> None:
        """Take the run (compare-and-set) with this engine as lease owner, then execute it."""
        self.check_agent(record.agent)  # a broken agent's run stays as it is, for when it loads again
        expected = record.version
        now = self.clock.time()
        record.status = RunStatus.running
        record.interrupt = None
        record.wake_at = None
        record.lease_owner = self._lease_token()
        record.lease_expires = record.due_at = now + self.lease_ttl
        record.updated_at = to_datetime(now)  # type: ignore[assignment]
        if recovered:  # a crash interrupted it: the new execution shows so in its events
            record.attempt += 1
            events = (*events, ev.run_started(record.id, record.thread_id, record.attempt))
        await self.store.save_run(
            record, expected_version=expected, journal=journal, events=[ev.dumps(event) for event in events]
        )
        record.version = expected + 1
        if events:
            self.tail.notify(record.id)
        self._disarm(record.id)
        self._spawn(record)

    def _lapses(self, record: RunRecord) -> bool:
        """Running under another process's lease, which lapses unless that process renews it."""
        owner = record.lease_owner or ""
        return record.status == RunStatus.running and not owner.startswith(f"{self.owner}/")

    def _lease_token(self) -> str:
        """This process and this claim: a step of an earlier execution of the same run in this
        process (one that outlived its lease) cannot write through a later claim's lease."""
        return f"{self.owner}/{new_id('c')[-10:]}"

    def _spawn(self, record: RunRecord, *, fresh: bool = False) -> None:
        """Execute ``record`` in a task of its own; ``fresh``: created just now, so its journal is empty."""
        self.start_background()
        execution = Execution(
            record,
            self.store,
            owner=record.lease_owner or self.owner,
            clock=self.clock,
            budget=self.budget,
            max_step_bytes=self.max_step_bytes,
            delta_batch_ms=self.delta_batch_ms,
            notify=self.tail.notify,
        )
        task = asyncio.get_running_loop().create_task(
            self._execute(execution, fresh=fresh), name=f"agent-unit {record.id}"
        )
        self._executions[record.id] = (task, execution)
        task.add_done_callback(lambda done: self._forget(record.id, done))

    def _forget(self, run_id: str, task: asyncio.Task[None]) -> None:
        running = self._executions.get(run_id)
        if running is not None and running[0] is task:
            del self._executions[run_id]

    def _stop(self, run_id: str, reason: str) -> None:
        running = self._executions.get(run_id)
        if running is not None:
            task, execution = running
            execution.stop_reason = reason
            execution.signal.set()
            task.cancel()

    async def _execute(self, execution: Execution, *, fresh: bool = False) -> None:
        record = execution.record
        renewal = asyncio.ensure_future(self._keep_lease(execution, asyncio.current_task()))
        token = None
        try:
            agent = self.agents.get(record.agent)
            journal = {} if fresh else await self.store.load_journal(record.id)
            run = Run(execution, journal)
            token = active_run.set(run)
            outcome: BaseException | None = None
            output: Any = None
            try:
                if agent is None:
                    raise AgentNotFound(f"run {record.id} is for agent {record.agent!r}, which this deployment lacks")
                result = await agent(agent.validate_input(record.input), run)
                try:
                    output = agent.dump_output(result)
                except ValidationError as exc:
                    raise TypeError(
                        f"agent {record.agent!r} returned a value that does not fit its return type: {exc}"
                    ) from None
                output = self._stored_output(record.agent, output)
            except Park as park:
                await execution.settle(self.lease_ttl)  # journal steps still running beside the park first
                outcome = park
            except BaseExceptionGroup as group:  # a framework's task group wrapped the park (or a failure)
                wrapped = _park_in(group)
                if wrapped is None and not isinstance(group, Exception):
                    raise
                if wrapped is not None:
                    await execution.settle(self.lease_ttl)
                outcome = wrapped or group
            except Exception as exc:  # noqa: BLE001 - the run fails; the engine goes on
                outcome = exc
            record.usage = record_usage(run.usage)
            self._stop_renewal(execution, renewal)  # from here on this execution only saves its outcome
            try:
                if isinstance(outcome, Park):
                    await self._park(execution, outcome)
                elif outcome is not None:
                    log.error("run %s of agent %r failed", record.id, record.agent, exc_info=outcome)
                    await self._end(execution, RunStatus.failed, error=outcome, step=run.failed_step(outcome))
                else:
                    await self._end(execution, RunStatus.completed, output=output)
            except (StoreUnavailable, LeaseLost):
                log.warning("saving run %s failed: the store is out of reach; the sweep recovers the run", record.id)
            except _REFUSED as exc:
                # The outcome cannot be stored (a value, not the store): the run fails with that, once.
                # Recovering it would only run it to the same outcome again, and again.
                log.exception("the outcome of run %s cannot be stored; the run fails", record.id)
                error = UnstorableValue(f"the outcome of run {record.id} cannot be stored: {exc}")
                try:
                    await self._end(execution, RunStatus.failed, error=error)
                except Exception:
                    log.exception("saving run %s failed; the sweep will recover it once its lease lapses", record.id)
            except Exception:
                log.exception("saving run %s failed; the sweep will recover it once its lease lapses", record.id)
        except asyncio.CancelledError:
            if execution.stop_reason == "shutdown":
                self._stop_renewal(execution, renewal)
                await self._release(execution)
            if execution.stop_reason is None:
                raise
        except Exception:
            log.exception("executing run %s failed; the sweep will recover it once its lease lapses", record.id)
        finally:
            renewal.cancel()
            execution.close()
            if token is not None:
                active_run.reset(token)

    async def _keep_lease(self, execution: Execution, task: asyncio.Task[Any] | None) -> None:
        """Renew the lease while the run executes; stop this execution if it was lost."""
        record = execution.record
        while True:
            await asyncio.sleep(self.lease_ttl / 3)
            expires = self.clock.time() + self.lease_ttl
            async with execution.lock:  # never cancelled in here (see _stop_renewal)
                if execution.stopping:
                    return
                try:
                    version = await self.store.renew_lease(record.id, owner=execution.owner, expires=expires)
                except Exception as exc:  # noqa: BLE001 - try again next time; the lease fence guards the gap
                    log.warning("renewing the lease of run %s failed (%s): trying again", record.id, type(exc).__name__)
                    continue
                if version is not None:
                    record.version = version
                    record.lease_expires = record.due_at = expires
            if version is None:
                execution.stop_reason = "lost"
                execution.signal.set()
                if task is not None:
                    task.cancel()
                return

    @staticmethod
    def _stop_renewal(execution: Execution, renewal: asyncio.Future[None]) -> None:
        """Stop renewing before the outcome is saved, without cutting a renewal in half.

        A renewal that already holds the lock finishes and records the version it bumped;
        one that is asleep or still waiting for the lock is cancelled.
        """
        execution.stopping = True
        if not execution.lock.locked():
            renewal.cancel()

    async def _save(
        self, execution: Execution, *, journal: tuple[JournalEntry, ...] = (), event: dict[str, Any]
    ) -> bool:
        """Save the run's new status with its pending events; False if someone else changed it."""
        record = execution.record
        record.updated_at = to_datetime(self.clock.time())  # type: ignore[assignment]
        async with execution.lock:
            expected = record.version  # read under the lock: a lease renewal bumps it
            events = execution.events.drain(event)
            while True:
                try:
                    await self.store.save_run(record, expected_version=expected, journal=journal, events=events)
                    break
                except RunConflict:
                    stored = await self.store.load_run(record.id)
                    if stored is None or stored.status != RunStatus.running or stored.lease_owner != execution.owner:
                        log.info("run %s changed while executing (cancelled or taken over); it stops", record.id)
                        return False
                    expected = stored.version  # still ours: a message was stored meanwhile (send)
        record.version = expected + 1
        self.tail.notify(record.id)
        return True

    def _finish(self, record: RunRecord, status: RunStatus) -> None:
        now = self.clock.time()
        record.status = status
        record.interrupt = None
        record.wake_at = None
        record.lease_owner = record.lease_expires = None
        record.finished_at = to_datetime(now)
        record.updated_at = record.finished_at  # type: ignore[assignment]
        record.due_at = None if self.retention is None else now + self.retention

    async def _end(
        self,
        execution: Execution,
        status: RunStatus,
        *,
        output: Any = None,
        error: BaseException | None = None,
        step: str | None = None,
    ) -> None:
        """End the run: ``output`` is storable already (:meth:`_stored_output`); ``step`` names the
        step ``error`` came from. The error's text is scrubbed, so a failure can always be saved."""
        record = execution.record
        self._finish(record, status)
        if error is None:
            record.output = output
            event = ev.run_finished(record.id, record.thread_id, output, agui_usage(record.usage))
        else:
            code = getattr(error, "code", None)
            code = code if isinstance(code, str) else type(error).__name__
            message = jsontext.message_of(error)
            record.output = None
            scrubbed = (
                {key: jsontext.scrub(value) if isinstance(value, str) else value for key, value in frame.items()}
                for frame in user_frames(error)
            )
            frames = [ErrorFrame.model_validate(frame) for frame in scrubbed]
            record.error = RunError(
                type=type(error).__name__, message=message, step=step and jsontext.scrub(step), frames=frames
            )
            event = ev.run_error(message, jsontext.scrub(code))
        await self._save(execution, event=event)

    def _stored_output(self, agent: str, output: Any) -> Any:
        """The run's output as the store keeps it; ``UnstorableValue`` (the run fails) if it cannot be."""
        try:
            _, size = jsontext.encode(output)
        except ValueError as exc:
            raise UnstorableValue(f"the output of agent {agent!r} cannot be stored as JSON: {exc}") from None
        if size > self.max_step_bytes:
            raise UnstorableValue(
                f"the output of agent {agent!r} is {size:,} bytes of JSON, over max_step_bytes "
                f"({self.max_step_bytes:,}): store large data elsewhere (a file, a bucket, a table) and return its key"
            )
        return output

    async def _park(self, execution: Execution, park: Park) -> None:
        record = execution.record
        record.lease_owner = record.lease_expires = None
        if isinstance(park, Interrupted):
            record.status = RunStatus.interrupted
            record.interrupt = park.interrupt
            record.due_at = None
            interrupt = park.interrupt
            event = ev.run_interrupted(
                record.id,
                record.thread_id,
                {
                    "name": interrupt.name,
                    "key": interrupt.key,
                    "payload": interrupt.payload,
                    "answerSchema": interrupt.answer_schema,
                },
            )
            await self._save(execution, event=event)
        elif isinstance(park, Sleeping):
            record.status = RunStatus.sleeping
            record.wake_at = to_datetime(park.wake_at)
            record.due_at = park.wake_at
            journal = () if park.entry is None else (park.entry,)
            event = ev.run_sleeping(record.id, record.thread_id, record.wake_at.isoformat())  # type: ignore[union-attr]
            if await self._save(execution, journal=journal, event=event):
                await self._schedule(record.id, park.wake_at)
        elif isinstance(park, Yielded):
            record.status = RunStatus.queued
            record.due_at = self.clock.time() + self.lease_ttl  # the sweep's fallback if the continuation is lost
            if await self._save(execution, event=ev.custom("agent-unit.yield", None)):
                await self._continue(record.id)
        elif isinstance(park, Cancelled):
            pass  # whoever cancelled it (or took it over) saved the run
        else:
            error = RuntimeError(f"agent code raised {type(park).__name__}, which only agent-unit may raise")
            await self._end(execution, RunStatus.failed, error=error)

    async def _release(self, execution: Execution) -> None:
        """On shutdown: hand the run back so any process's next sweep continues it at once."""
        record = execution.record
        record.status = RunStatus.queued
        record.lease_owner = record.lease_expires = None
        record.due_at = self.clock.time()
        await self._save(execution, event=ev.custom("agent-unit.released", None))

    async def _continue(self, run_id: str) -> None:
        """Continue a yielded run: through the host's hook, or right here in a fresh execution."""
        try:
            if self.on_continue is None:
                await self.continue_run(run_id)  # spawned before this execution ends, so wait() follows it
            else:
                await _maybe_await(self.on_continue(run_id))
        except Exception:
            log.exception("continuing run %s failed; the sweep will pick it up", run_id)

    async def _schedule(self, run_id: str, wake_at: float) -> None:
        """Arrange the wake-up of a run saved as sleeping; a hook that fails leaves it to the sweep."""
        if self.schedule_wake is None:
            self._arm(run_id, wake_at)
            return
        try:
            await _maybe_await(self.schedule_wake(run_id, to_datetime(wake_at)))  # type: ignore[arg-type]
        except Exception:
            log.exception("schedule_wake failed for run %s; the sweep wakes it when it is due", run_id)

    # -- timers --------------------------------------------------------------------------

    def _arm(self, run_id: str, wake_at: float) -> None:
        """A timer for a wake-up due before the next sweep (later ones cost nothing until then)."""
        if self.clock.manual or self.schedule_wake is not None or not self._sweeps:
            return  # a host that sweeps for us (serverless) runs nothing between its requests
        delay = max(0.0, wake_at - self.clock.time())
        if delay > self.sweep_interval:
            return
        self._disarm(run_id)
        self._timers[run_id] = asyncio.get_running_loop().call_later(delay, self._on_timer, run_id)

    def _disarm(self, run_id: str) -> None:
        timer = self._timers.pop(run_id, None)
        if timer is not None:
            timer.cancel()

    def _on_timer(self, run_id: str) -> None:
        self._timers.pop(run_id, None)

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
        record = await self.get(run_id)
        if record.status == RunStatus.sleeping:
            await self.wake(run_id)
        elif record.status in _LEASED and record.due_at is not None and run_id not in self._executions:
            if record.due_at <= self.clock.time():
                await self._sweep_one(record, SweepResult())  # the lease lapsed: recover this run, from this read
            elif self._lapses(record):
                self._arm(run_id, record.due_at + _LAPSE_MARGIN)  # renewed: follow it to its new expiry

    def _track(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


_LEASED = (RunStatus.running, RunStatus.queued)
_LAPSE_MARGIN = 0.1  # seconds after a lease's expiry: a timer may fire a little early
_QUEUED_WHY = "it was waiting to continue (handed back at shutdown, or its continuation was lost)"


def _park_in(group: BaseExceptionGroup) -> Park | None:
    """The first park inside an exception group, as parallel tool calls in a task group raise it."""
    for exc in group.exceptions:
        found = _park_in(exc) if isinstance(exc, BaseExceptionGroup) else exc if isinstance(exc, Park) else None
        if found is not None:
            return found
    return None


def _check_thread_id(thread_id: Any) -> None:
    """A thread id is a key in every store and a field of every record: short, printable text."""
    if thread_id is None or thread_id == "":
        return
    if not isinstance(thread_id, str) or len(thread_id) > MAX_THREAD_ID or not thread_id.isprintable():
        raise InvalidArgument(
            f"thread_id {jsontext.shown(thread_id)} is not a thread id: "
            f"use at most {MAX_THREAD_ID} printable characters (no control characters or lone surrogates)"
        )


def _stored_input(definition: Agent, agent: str, raw: Any) -> Any:
    """The input as the store keeps it and every execution reads it back; ``InvalidInput`` (no run
    is created) if it cannot be stored, or does not fit the agent once read back."""
    value = definition.validate_input(raw)
    try:
        jsontext.encode(raw)  # as given: NaN, lone surrogates, depth, huge ints (dumping may hide some)
        text, _ = jsontext.encode(definition.dump_input(value))
    except ValueError as exc:
        raise InvalidInput(f"the input for agent {agent!r} cannot be stored as JSON: {exc}") from None
    stored = json.loads(text)
    definition.validate_input(stored)  # what each execution validates: the input read back
    return stored


def _check_interrupt(record: RunRecord, key: str | None) -> None:
    if key is not None and (record.interrupt is None or record.interrupt.key != key):
        waiting = record.interrupt.key if record.interrupt is not None else record.status.value
        raise RunConflict(f"run {record.id} no longer waits at {key} (now: {waiting}): read the run again")
