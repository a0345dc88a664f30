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
import json
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from . import _events as ev
from . import _jsontext as jsontext
from . import telemetry
from ._agent import Agent, FrameworkAgent
from ._answers import check_answer
from ._clock import Clock, SystemClock, to_datetime
from ._deadlines import expiry_entry, late_answer
from ._durations import Duration, parse_duration
from ._execution import Execution
from ._executor import Executor
from ._host import SERVER, Host, OnContinue, ScheduleWake
from ._ids import new_id
from ._limits import Limits
from ._owners import owner_is_gone, process_owner
from ._prices import Prices, priced
from ._records import (
    Answer,
    JournalEntry,
    RunPage,
    RunRecord,
    RunStatus,
    StoredEvent,
    agui_usage,
    record_usage,
)
from ._retries import next_mark
from ._scheduler import Scheduler
from ._settling import holder_gone, unfinished_steps
from ._sweeper import Sweeper, SweepResult
from ._tail import EventTail
from ._tasks import Task
from ._usage import merge_usage
from .errors import (
    AgentBroken,
    AgentNotFound,
    InterruptExpired,
    InvalidAnswer,
    InvalidArgument,
    InvalidInput,
    NotFailed,
    NotInterrupted,
    RunConflict,
    RunNotFound,
    StoreUnavailable,
    UnstorableValue,
)
from .stores import Store, open_store

__all__ = ["RunEngine", "SweepResult"]

log = logging.getLogger("agent_unit")

_NO_RUN = "run_healthz"  # the id a ping reads: no run ever has it

MAX_THREAD_ID = 256
_LAPSE_MARGIN = 0.1  # seconds after a lease's expiry: surely lapsed then


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
                given = agents[name]
                kind = type(given.value if isinstance(given, FrameworkAgent) else given).__name__
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


class RunEngine:
    """Starts, executes, parks, wakes and recovers runs over one store.

    ``host`` (:class:`~agent_unit.Host`, default a long-lived server's) says how a yielded
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
    ``limits`` (:class:`~agent_unit._limits.Limits`: tokens, model calls, cost): what each run may
    spend, lowered by its agent's own (``define_agent(..., limits=...)``), and the most a start may
    ask for; a model call that would pass one is not made. ``prices``
    (:class:`~agent_unit._prices.Prices`): what model calls cost; with them (or a cost limit) a
    run's and a thread's usage show ``cost_usd``.
    ``approval_timeout``: a tool approval of an adapter that nobody answers in this long is
    declined (the run goes on, the call is not made); by default an approval waits for good.
    What a protocol reads besides ``get``, ``list`` and ``events`` (a run's last seq, its
    journaled values, a health ping) is here too: nothing above the engine reads its
    ``store``, so what a read means (an id no store can hold is no run; a store that does not
    answer is a 503) is decided once, here.
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
        approval_timeout: Duration | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        prices: Prices | Mapping[str, Any] | None = None,
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
        self.approval_timeout = _seconds(approval_timeout)
        self.limits = limits if isinstance(limits, Limits) or limits is None else Limits.model_validate(limits)
        self.prices = prices if isinstance(prices, Prices) or prices is None else Prices.model_validate(prices)
        self.host: Host = host or SERVER
        self.schedule_wake = schedule_wake if schedule_wake is not None else self.host.schedule_wake
        self.on_continue = on_continue if on_continue is not None else self.host.on_continue()
        self.owner = owner or process_owner("x")
        self.tail = EventTail(self.store)
        self._store_checked = False
        self._executor = Executor(self)
        # A long-lived process sweeps by itself (from its first execution on); a serverless
        # host (Host(sweep="scheduled")) calls sweep() from its scheduler instead.
        sweeps = self.host.background_sweep if background_sweep is None else background_sweep
        self._sweeper = Sweeper(self, self._executor, enabled=sweeps and not self.clock.manual)
        self._executor.sweeper = self._sweeper

    @property
    def _timers(self) -> dict[str, asyncio.TimerHandle]:
        """The armed wake-up timers, by run id (the tests check which are armed)."""
        return self._sweeper.timers

    @property
    def _background(self) -> set[asyncio.Task[Any]]:
        """Tasks the timers started that are still going (the tests check none are left)."""
        return self._sweeper.background

    # -- reading -------------------------------------------------------------------------

    async def get(self, run_id: str) -> RunRecord:
        record = await self.store.load_run(run_id) if jsontext.storable_name(run_id) else None  # find(), inlined
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

    async def thread_usage(self, thread_id: str, *, most: int = 10_000) -> builtins.list[dict[str, Any]]:
        """Token usage of every run of the thread (at most ``most`` runs, newest first), summed per
        provider and model, as a run's ``usage`` is (snake_case), with its cost (``cost_usd``) where
        :meth:`prices_for` a run of it prices it. Each run's usage is its journal's."""
        _check_thread_id(thread_id)
        entries: builtins.list[dict[str, Any]] = []
        cursor: str | None = None
        prices: Prices | None = None
        seen = 0
        while seen < most:
            page = await self.store.list_runs(thread_id=thread_id, limit=200, cursor=cursor)
            seen += len(page.runs)
            entries += [entry for run in page.runs for entry in agui_usage(run.usage)]
            prices = prices or next((found for run in page.runs if (found := self.prices_for(run))), None)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        return record_usage(priced(merge_usage(entries), prices))

    def prices_for(self, record: RunRecord) -> Prices | None:
        """What prices ``record``'s usage: the deployment's ``prices``, or the known models' when the
        run has a cost limit; None (no cost shown) otherwise, so ``genai-prices`` is not imported
        by a deployment that never asked for a cost."""
        if self.prices is not None:
            return self.prices
        return Prices() if record.limits is not None and record.limits.cost_usd is not None else None

    async def events(self, run_id: str, *, after: int = 0, limit: int | None = None) -> builtins.list[StoredEvent]:
        if not jsontext.storable_name(run_id):
            raise RunNotFound(f"run {jsontext.shown(run_id)} does not exist")
        return await self.store.read_events(run_id, after=after, limit=limit)

    async def find(self, run_id: str) -> RunRecord | None:
        """The run's record, or None where there is none (a stream that outlived a delete ends)."""
        return await self.store.load_run(run_id) if jsontext.storable_name(run_id) else None

    async def last_seq(self, run_id: str) -> int:
        """The seq of the run's last stored event (0: none): a stream started after it shows only what comes next."""
        return await self.store.last_seq(run_id)

    async def journal_values(self, run_id: str) -> dict[str, Any]:
        """Each value the run journaled (a step's result, an interrupt's answer), parsed, by key;
        entries that recorded an error are left out. A2A rebuilds a task's history from them."""
        journal = await self.store.load_journal(run_id)
        return {key: json.loads(entry.value) for key, entry in journal.items() if entry.value is not None}

    async def ping(self, seconds: float) -> None:
        """Raise :class:`~agent_unit.errors.StoreUnavailable` unless the store answers one read
        within ``seconds``: a health check's question. One read of a run that never
        exists: a round trip on every store, and no write."""
        try:
            await asyncio.wait_for(self.store.load_run(_NO_RUN), seconds)
        except StoreUnavailable:
            raise  # the store logged where and why
        except Exception as exc:  # noqa: BLE001 - whatever the driver raised, the store did not answer
            log.warning("healthz: the store did not answer (%s)", type(exc).__name__)
            raise StoreUnavailable(f"the store did not answer ({type(exc).__name__})") from None

    def executing(self) -> dict[str, asyncio.Task[None]]:
        """The task executing each run in this process, by run id (a copy: it does not change under you).

        For a host that must not end its invocation while runs still execute (Vercel's
        ``wait_until``), and for shutdown code that awaits or cancels them. A run parked or
        executing elsewhere is not here; its record in the store says where it stands.
        """
        return {run_id: task for run_id, (task, _) in self._executor.executions.items()}

    async def wait(self, run_id: str) -> RunRecord:
        """Wait for this process's execution of the run (and its continuations) to stop.

        The run as the last execution saved it when that save parked or ended it (the record the
        store holds, with no read); otherwise (cancelled, lost, handed on, or none ran here) as read."""
        last: Execution | None = None
        while (running := self._executor.executions.get(run_id)) is not None:
            task, last = running
            if task.done():
                self._executor.forget(run_id, task)
            else:
                await _finished(task)
        if last is not None and last.left is not None:
            return last.left
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

    async def start(
        self,
        agent: str,
        input: Any,
        *,
        thread_id: str | None = None,
        wait: bool = False,
        limits: Limits | Mapping[str, Any] | None = None,
    ) -> RunRecord:
        """Create a run and execute it; with ``wait``, return once it parks or ends.

        ``limits``: this run's, within the engine's (``InvalidArgument`` if one is over)."""
        record, opened = await self._create(agent, input, thread_id=thread_id, leased=True, limits=limits)
        self._executor.spawn(record, fresh=True, opened=opened)
        return await self.wait(record.id) if wait else record.model_copy()

    async def create(
        self,
        agent: str,
        input: Any,
        *,
        thread_id: str | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
    ) -> RunRecord:
        """Store a new run, queued for an executor elsewhere (another engine, e.g. Temporal's workers,
        which :meth:`advance` it): nothing executes it here, and nothing sweeps it."""
        record, _ = await self._create(agent, input, thread_id=thread_id, leased=False, limits=limits)
        return record

    async def _create(
        self,
        agent: str,
        input: Any,
        *,
        thread_id: str | None,
        leased: bool,
        limits: Limits | Mapping[str, Any] | None = None,
    ) -> tuple[RunRecord, Any]:
        """The new run, stored; and, when it is leased here and OpenTelemetry is on, its first
        span, opened now so the run is stored with its trace context (``record.trace``)."""
        definition = self.agent(agent)
        _check_thread_id(thread_id)
        stored = _stored_input(definition, agent, input)
        ceiling = self.limits.lowered(definition.limits) if self.limits is not None else definition.limits
        own = ceiling if limits is None else _limits(limits).within(ceiling)
        now = self.clock.time()
        moment = to_datetime(now)
        record = RunRecord(
            id=new_id("run"),
            agent=agent,
            thread_id=thread_id or new_id("thread"),
            status=RunStatus.running if leased else RunStatus.queued,
            input=stored,
            created_at=moment,  # type: ignore[arg-type]
            updated_at=moment,  # type: ignore[arg-type]
            version=1,
            lease_owner=self._executor.lease_token() if leased else None,
            lease_expires=now + self.lease_ttl if leased else None,
            due_at=now + self.lease_ttl if leased else None,
            limits=own,
        )
        observed = telemetry.active() if leased else None
        opened = None if observed is None else observed.open_run(record)
        try:
            await self.store.create_run(
                record, events=[ev.dumps(ev.run_started(record.id, record.thread_id, record.attempt))]
            )
        except BaseException:
            if opened is not None:
                opened.end()
            raise
        if observed is not None:  # a queued run counts once its executor accepts it (Temporal's start)
            observed.started(record.agent)
        self.tail.notify(record.id)
        return record, opened

    async def discard(self, run_id: str) -> None:
        """Delete a run that :meth:`create` stored and nothing ever executed (its executor refused it)."""
        await self.store.delete_run(run_id)

    async def advance(self, run_id: str) -> RunRecord:
        """Execute the run in this process from where it stands until it parks or ends, and return it.

        For an engine that decides elsewhere when a run executes (Temporal's workers): a queued run
        is claimed, a sleeper once its wake time has come, a running run once its lease lapsed or
        its owner on this machine is gone (the run is recovered, its attempt counted); an
        interrupted or finished run is returned as it is. Claims are compare-and-set saves, so two
        processes advancing one run execute it once.
        """
        while True:
            if run_id in self._executor.executions:
                return await self.wait(run_id)
            record = await self.get(run_id)
            now = self.clock.time()
            try:
                if record.status == RunStatus.queued:  # its first execution has no trace stored yet
                    await self._executor.claim(record, kind="continue" if record.trace else "start")
                elif record.status == RunStatus.sleeping:
                    if record.due_at is not None and record.due_at > now:
                        await asyncio.sleep(record.due_at - now)
                        continue
                    await self._executor.claim(
                        record, events=(ev.run_started(record.id, record.thread_id, record.attempt),), kind="wake"
                    )
                elif record.status == RunStatus.running:
                    expires = record.lease_expires or 0.0
                    if expires > now and not owner_is_gone(record.lease_owner or ""):
                        await asyncio.sleep(min(expires - now + _LAPSE_MARGIN, self.lease_ttl))
                        continue
                    await self._executor.claim(record, recovered=True, kind="recover")
                else:
                    return record
            except RunConflict:
                continue  # changed meanwhile: look again
            return await self.wait(run_id)

    async def resume(
        self,
        run_id: str,
        answer: Any,
        *,
        wait: bool = False,
        interrupt_key: str | None = None,
        answered_by: str | None = None,
        accepted_at: float | None = None,
        record: RunRecord | None = None,
    ) -> RunRecord:
        """Answer an interrupted run and execute it on. The answer must fit the interrupt's schema.

        ``interrupt_key``: the interrupt the answer was given for. If the run has moved on to
        another one meanwhile, the answer is refused (409) instead of landing on the wrong one;
        the check and the save are one compare-and-set. ``answered_by``: who answered, recorded
        with when in the run's ``answers`` and its resumed segment's ``RUN_STARTED``. An answer
        after the interrupt's deadline is refused (:class:`~agent_unit.errors.InterruptExpired`, 409).
        ``accepted_at``: when the answer was taken, if not now: an engine that takes answers before
        it saves them (Temporal's Update) passes that time, so an answer taken before the deadline
        is not late when it is saved after it.

        ``record``: the run as the caller read it a moment ago (to authorize the answer), so the
        resume need not read it again (left as it is: the resume claims a copy). A stale one costs
        a read: whatever it makes the resume refuse (the claim's compare-and-set included) is
        checked again on the run as stored, so the outcome is the one a fresh read gives.

        With ``wait``, the answer is saved with the execution's first write (see
        :class:`~agent_unit._execution.DeferredClaim`): a resume that replays to the run's end or next
        park is one transaction. Until then the store has no trace of it, so if the process dies
        first, this call fails and the run still waits for its answer: send it again.
        """
        taken = (answer, interrupt_key, answered_by, accepted_at)
        if record is None or record.id != run_id:
            task, execution = await self._answer(await self.get(run_id), *taken, defer=wait)
        else:
            try:
                task, execution = await self._answer(record.model_copy(), *taken, defer=wait)
            except (RunConflict, NotInterrupted, InterruptExpired, InvalidAnswer):
                task, execution = await self._answer(await self.get(run_id), *taken, defer=wait)
        if not wait:
            return execution.record
        mine = execution.record.answers[-1]
        await _finished(task)
        if execution.deferred is not None:  # not seen to be written
            if execution.deferred.deadline is not None:  # the run may still wait there: its deadline's timer again
                self._sweeper.arm(run_id, execution.deferred.deadline)
            stored = await self.get(run_id)
            if not isinstance(execution.unclaimed, RunConflict) and mine in stored.answers:
                # Written after all (a write cut off by a cancel, or an outage after it landed): the run
                # has it. Not after a refused compare-and-set, which wrote nothing: an answer by nobody
                # known, taken in the same microsecond as the winner's, is an equal record.
                return await self.wait(run_id)
            if isinstance(execution.unclaimed, StoreUnavailable):
                raise execution.unclaimed
            # The run changed since it was read (resumed, cancelled or expired by someone else, or
            # the record given was stale): answer the run as stored, claimed at once this time, and
            # only at the interrupt the answer was for (409 if the run has moved on to another).
            task, execution = await self._answer(stored, answer, mine.key, answered_by, accepted_at)
            await _finished(task)
        if execution.left is not None and run_id not in self._executor.executions:
            return execution.left  # parked or ended, and nothing went on from there: no read
        return await self.wait(run_id)

    async def _answer(
        self,
        record: RunRecord,
        answer: Any,
        interrupt_key: str | None,
        answered_by: str | None,
        accepted_at: float | None,
        *,
        defer: bool = False,
    ) -> tuple[asyncio.Task[None], Execution]:
        """Check ``answer`` against ``record`` and claim the run with it journaled (see :meth:`resume`);
        ``defer``: with the execution's first write."""
        run_id = record.id
        now = self.clock.time() if accepted_at is None else accepted_at
        late = late_answer(record, now)
        if late is not None:
            raise late
        if record.status != RunStatus.interrupted or record.interrupt is None:
            raise NotInterrupted(f"run {run_id} is {record.status.value}, not interrupted: there is nothing to resume")
        _check_interrupt(record, interrupt_key)
        interrupt = record.interrupt
        text = check_answer(record, answer, limit=self.max_step_bytes)
        moment = to_datetime(now)
        assert moment is not None
        record.answers = [
            *record.answers,
            Answer(interrupt=interrupt.name, key=interrupt.key, by=answered_by, at=moment),
        ]
        at = moment.isoformat()
        entry = JournalEntry(interrupt.key, text, meta={"by": answered_by, "at": at})
        answered = {"name": interrupt.name, "key": interrupt.key, "by": answered_by, "at": at}
        started = ev.run_started(record.id, record.thread_id, record.attempt, answered=answered)
        return await self._executor.claim(record, journal=(entry,), events=(started,), kind="resume", defer=defer)

    async def expire(self, run_id: str, *, wait: bool = False) -> RunRecord:
        """Wake an interrupted run whose deadline passed with no answer (a timer, the sweep or the
        host's scheduler): the interrupt returns its ``default`` or raises ``InterruptExpired``."""
        record = await self.get(run_id)
        interrupt = record.interrupt
        if record.status != RunStatus.interrupted or interrupt is None or interrupt.expires_at is None:
            raise RunConflict(f"run {run_id} is {record.status.value}, with no deadline to pass")
        deadline = interrupt.expires_at.timestamp()
        if deadline > self.clock.time():
            self._sweeper.arm(run_id, deadline)
            return record
        await self.expire_now(record)
        return await self.wait(run_id) if wait else record

    async def expire_now(self, record: RunRecord) -> None:
        """Expire the interrupt ``record`` waits at (its deadline passed; the sweep read it): journal
        the expiry in place of an answer and execute the run on, in one compare-and-set."""
        interrupt = record.interrupt
        assert interrupt is not None and interrupt.expires_at is not None
        at = interrupt.expires_at
        record.answers = [*record.answers, Answer(interrupt=interrupt.name, key=interrupt.key, at=at, expired=True)]
        expired = ev.custom(
            ev.INTERRUPT_EXPIRED, {"name": interrupt.name, "key": interrupt.key, "expiredAt": at.isoformat()}
        )
        await self._executor.claim(
            record,
            journal=(expiry_entry(interrupt.key, at),),
            events=(ev.run_started(record.id, record.thread_id, record.attempt), expired),
            kind="wake",
        )

    async def retry(self, run_id: str, *, wait: bool = False) -> RunRecord:
        """Retry a failed run from the work that failed, with the agent code of this deployment.

        The journal is kept: the failed step (or model or tool call) runs again with a new attempt
        and the same idempotency key, every entry before it replays, and the code goes on from
        there (see :mod:`agent_unit._retries`). One compare-and-set: of concurrent retries, exactly
        one wins and the others get ``RunConflict`` (409).
        """
        record, events = await self._retried(run_id)
        try:
            await self._executor.claim(record, events=events, kind="retry")
        except RunConflict:
            raise RunConflict(f"run {run_id} was retried (or changed) by someone else first: read it again") from None
        return await self.wait(run_id) if wait else record

    async def queue_retry(self, run_id: str) -> RunRecord:
        """Mark a failed run for a retry, as :meth:`retry` does, but execute nothing: it is saved
        queued, for an engine that executes runs elsewhere (Temporal's workers) to take. One
        compare-and-set: of concurrent retries, exactly one wins; the others get ``RunConflict``."""
        record, events = await self._retried(run_id)
        expected = record.version
        record.status = RunStatus.queued
        record.lease_owner = record.lease_expires = None
        record.due_at = self.clock.time()  # whoever sweeps continues it, as a run handed back
        try:
            await self.store.save_run(record, expected_version=expected, events=[ev.dumps(event) for event in events])
        except RunConflict:
            raise RunConflict(f"run {run_id} was retried (or changed) by someone else first: read it again") from None
        record.version = expected + 1
        self.tail.notify(run_id)
        return record

    async def _retried(self, run_id: str) -> tuple[RunRecord, tuple[dict[str, Any], ...]]:
        """The failed run as its retry saves it (not saved yet), and the events the retry begins with."""
        record = await self.get(run_id)
        if record.status != RunStatus.failed:
            raise NotFailed(f"run {run_id} is {record.status.value}, not failed: only a failed run is retried")
        self.agent(record.agent)  # a deployment without the agent, or with its file broken, refuses here
        journal = await self.store.load_journal(run_id)
        moment = to_datetime(self.clock.time())
        assert moment is not None
        mark = next_mark(record, journal, moment)
        error = record.error
        step = error.step if error is not None and error.key is not None and error.key == mark.key else None
        record.retry = mark
        record.error = None
        record.output = None
        record.finished_at = None
        record.attempt += 1
        retried = ev.custom(ev.RETRIED, {"count": mark.count, "key": mark.key, "step": step})
        return record, (ev.run_started(record.id, record.thread_id, record.attempt), retried)

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
        if record.status == RunStatus.interrupted and record.interrupt is not None and record.interrupt.expires_at:
            return await self.expire(run_id, wait=wait)  # a deadline is a wake like a sleep's
        if record.status != RunStatus.sleeping:
            raise RunConflict(f"run {run_id} is {record.status.value}, not sleeping")
        if record.due_at is not None and record.due_at > self.clock.time():
            self._sweeper.arm(run_id, record.due_at)
            return record
        try:
            await self._executor.claim(
                record, events=(ev.run_started(record.id, record.thread_id, record.attempt),), kind="wake"
            )
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
        await self._executor.claim(record, kind="continue")
        return await self.wait(run_id) if wait else record

    async def cancel(self, run_id: str, *, interrupt_key: str | None = None, settle: float = 5.0) -> RunRecord:
        """Cancel a queued, running, interrupted or sleeping run (``interrupt_key``: only while it
        still waits at that interrupt).

        A running run may have a step in flight anywhere (a sync step's thread cannot be stopped):
        the cancelled record's ``settling`` names the steps still running, and the process running
        them sets it to None once they have ended (or the sweep does, once that process's lease
        lapses or it is seen to have ended; a cancel that finds it ended has nothing to settle).
        This waits up to
        ``settle`` seconds for that, so the record returned says whether anything of the run still
        runs: ``settling`` None, nothing does; otherwise, which steps are still settling.
        """
        while True:
            record = await self.get(run_id)
            if record.finished:
                raise RunConflict(f"run {run_id} is already {record.status.value}")
            if interrupt_key is not None:
                _check_interrupt(record, interrupt_key)
            expected = record.version
            owner, expires = record.lease_owner, record.lease_expires
            settling: builtins.list[str] | None = None
            if record.status == RunStatus.running and owner is not None:
                running = self._executor.running(run_id)
                if running is not None:
                    settling = running
                elif not holder_gone(record, self.clock.time()):  # a dead process runs nothing
                    settling = await self._unfinished_steps(run_id)
            self._executor.finish(record, RunStatus.cancelled)
            if settling is not None:
                # The lease stays on the record: its owner is the one process that may say its steps
                # ended, and renews it until then; the sweep looks again once it lapses (settling).
                record.settling, record.lease_owner, record.lease_expires = settling, owner, expires
                record.due_at = expires
            try:
                await self.store.save_run(
                    record, expected_version=expected, events=[ev.dumps(ev.run_cancelled(record.id, record.thread_id))]
                )
            except RunConflict:
                continue  # changed under us (a lease renewal, a park): look again
            record.version = expected + 1
            break
        self.tail.notify(run_id)
        if (observed := telemetry.active()) is not None:  # here, not in an execution: a parked run has none
            observed.finished(record.agent, RunStatus.cancelled.value)
        self._sweeper.disarm(run_id)
        self._executor.stop(run_id, "cancelled")
        if record.settling is not None and settle > 0:
            return await self._settled(run_id, settle)
        return record

    def stop(self, run_id: str) -> None:
        """Stop this process's execution of the run now, saving nothing: whoever decided that it
        stops saved the run already (a cancel through another engine, such as Temporal's)."""
        self._executor.stop(run_id, "cancelled")

    async def _unfinished_steps(self, run_id: str) -> builtins.list[str]:
        """The steps a run executing elsewhere has in flight, as its last events show them."""
        after = max(0, await self.store.last_seq(run_id) - 1000)
        return unfinished_steps(await self.store.read_events(run_id, after=after))

    async def _settled(self, run_id: str, limit: float) -> RunRecord:
        """The cancelled run once nothing of it runs anywhere, or after ``limit`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        delay = 0.01
        while True:
            task = self._executor.executions.get(run_id)
            if task is not None:  # here: its end clears settling at once
                await asyncio.wait([task[0]], timeout=max(0.0, deadline - loop.time()))
            record = await self.get(run_id)
            if record.settling is None or loop.time() >= deadline:
                return record
            await asyncio.sleep(min(delay, max(0.0, deadline - loop.time())))
            delay = min(delay * 2, 0.5)

    async def delete(self, run_id: str) -> None:
        """Delete a finished run with its journal and events."""
        record = await self.get(run_id)
        if not record.finished:
            raise RunConflict(f"run {run_id} is {record.status.value}: cancel it before deleting it")
        await self.store.delete_run(run_id)

    async def run_tick(self, task: Task, scheduled_at: datetime, *, owner: str | None = None) -> dict[str, Any]:
        """Run one tick of a scheduled ``task`` that a host's scheduler delivered, claimed in this
        engine's store under ``owner`` (default the engine's; see
        :func:`agent_unit._scheduler.run_host_tick`): a host runs its ticks through the engine and
        never reads the store itself."""
        from ._scheduler import run_host_tick

        return await run_host_tick(task, scheduled_at, self.store, owner=owner or self.owner)

    async def sweep(self, *, wait: bool = False, limit: int = 500, lapsing: bool = False) -> SweepResult:
        """Wake due sleepers, recover runs whose lease lapsed, delete runs past retention.

        A run whose lease is held by a process of this machine that has ended (a server killed
        and started again) is recovered at once, without waiting for the lease to lapse (see
        :func:`agent_unit._owners.owner_is_gone`). ``lapsing``: also arm a timer for each lease
        that lapses before the next sweep, so the run is recovered when its lease lapses, not at
        the next sweep (a long-lived server's sweeps do; a timer that finds the lease renewed
        follows it to its new expiry).
        """
        return await self._sweeper.sweep(wait=wait, limit=limit, lapsing=lapsing)

    async def watch_leases(self, *, limit: int = 500) -> SweepResult:
        """Arm a timer for every wake and every other process's lease due before the next sweep,
        and recover at once the runs of a process of this machine that has ended.

        A long-lived server does this every half lease (:meth:`run_sweeps`), between its sweeps,
        so a run whose server died is recovered when its lease lapses, even if it started after
        the last sweep."""
        return await self._sweeper.watch_leases(limit=limit)

    async def run_sweeps(self) -> None:
        """Sweep every ``sweep_interval`` until cancelled (a long-lived server's loop), and watch
        the leases of other processes every half lease between sweeps (:meth:`watch_leases`).

        The first sweep runs at once: a server that starts recovers what it can right away.
        """
        await self._sweeper.run()

    async def check_store(self) -> None:
        """Reach the store once (a shared store's ``check()``), so bad configuration fails at start."""
        check = getattr(self.store, "check", None)
        if check is not None and not self._store_checked:
            await check()
            self._store_checked = True

    def scheduler(self, tasks: Mapping[str, Any]) -> Scheduler:
        """An in-process :class:`~agent_unit._scheduler.Scheduler` of ``tasks`` (``{name: {"schedule",
        "handler"}}``) on this engine's clock, claiming each tick in its store."""
        return Scheduler(tasks, self.store, clock=self.clock)

    def start_background(self) -> None:
        """Start the sweep loop now (a server calls this at startup, so sleepers wake on time)."""
        self._sweeper.start()

    async def aclose(self) -> None:
        """Stop local executions (their runs are released for another process), timers and sweeps."""
        await self._sweeper.stop()
        tasks = [task for task, _ in self._executor.executions.values()]
        for run_id in list(self._executor.executions):
            self._executor.stop(run_id, "shutdown")
        await asyncio.gather(*tasks, *self._sweeper.background, return_exceptions=True)
        settling = list(self._executor.settling)
        if settling:  # a cancelled run saying it settled: a moment for it, none for a thread that never ends
            _, late = await asyncio.wait(settling, timeout=1.0)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        if self._owns_store:
            await self.store.close()


async def _finished(task: asyncio.Task[None]) -> None:
    """Wait until ``task`` has finished, whatever its outcome, and never cancel it: a waiter that is
    cancelled (its client left) leaves the execution running. ``asyncio.wait([task])`` does this
    too, with a set, a generator and two sets of results on top (0.9% of a resume over HTTP)."""
    waiter = asyncio.get_running_loop().create_future()

    def wake(_: asyncio.Task[None]) -> None:
        if not waiter.done():
            waiter.set_result(None)

    task.add_done_callback(wake)
    try:
        await waiter
    finally:
        task.remove_done_callback(wake)


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


def _limits(given: Limits | Mapping[str, Any]) -> Limits:
    """A start's limits, or ``InvalidArgument`` (422) naming what is wrong with them."""
    if isinstance(given, Limits):
        return given
    try:
        return Limits.model_validate(given)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidArgument(f"limits.{where}: {first['msg']}") from None


def _check_interrupt(record: RunRecord, key: str | None) -> None:
    if key is not None and (record.interrupt is None or record.interrupt.key != key):
        waiting = record.interrupt.key if record.interrupt is not None else record.status.value
        raise RunConflict(f"run {record.id} no longer waits at {key} (now: {waiting}): read the run again")
