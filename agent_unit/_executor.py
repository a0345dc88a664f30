"""Executing a run under a lease: claim it, run its agent in a task, renew the lease, save the outcome.

Every save is a compare-and-set on the run's version under the lease this process holds, so
an execution that lost its lease (cancelled, or taken over by the sweep elsewhere) stops
instead of overwriting the run. Kept apart from :class:`~agent_unit.RunEngine` so the
engine's commands read as what they change, and this as how an execution holds on to a run.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from . import _events as ev
from . import _jsontext as jsontext
from . import telemetry
from ._clock import to_datetime
from ._execution import DeferredClaim, Execution
from ._parks import Cancelled, Interrupted, Park, Sleeping, Yielded
from ._prices import priced
from ._records import ErrorFrame, JournalEntry, RunError, RunRecord, RunStatus, agui_usage, assign, record_usage
from ._retries import journal_view
from ._settling import settled
from ._tracebacks import user_frames
from .errors import (
    VALUE_ERRORS,
    AgentNotFound,
    AgentUnitError,
    LeaseLost,
    RunConflict,
    StoreUnavailable,
    UnstorableValue,
)
from .run import Run, active_run

if TYPE_CHECKING:
    from ._agent import Agent
    from ._engine import RunEngine
    from ._sweeper import Sweeper

__all__ = ["Executor", "maybe_await"]

log = logging.getLogger("agent_unit")

# A write refused for what it holds (not JSON, not UTF-8, too large): never a store outage.
_REFUSED: tuple[type[BaseException], ...] = (AgentUnitError, *VALUE_ERRORS)

# What an execution's own save can leave a run as, for good or until someone acts (answer, wake,
# retry): the record it saved is then what the store holds (see ``Execution.left``). Not queued:
# a yielded or released run goes on at once, maybe elsewhere.
_LEFT = frozenset({RunStatus.interrupted, RunStatus.sleeping, RunStatus.completed, RunStatus.failed})


async def maybe_await(value: Awaitable[None] | None) -> None:
    """Await a host hook's result if it is awaitable: hooks may be plain or async functions."""
    if inspect.isawaitable(value):
        await value


class Executor:
    """The runs this process executes, each in a task of its own under a lease it renews.

    ``engine`` gives the store, clock, agents and settings; ``sweeper`` (set by the engine
    once both exist) arranges a sleeping run's wake-up and drops its timer when it is claimed.
    """

    sweeper: Sweeper

    def __init__(self, engine: RunEngine) -> None:
        self._engine = engine
        self.executions: dict[str, tuple[asyncio.Task[None], Execution]] = {}
        self.settling: set[asyncio.Future[None]] = set()  # cancelled executions saying they have settled

    async def claim(
        self,
        record: RunRecord,
        *,
        journal: tuple[JournalEntry, ...] = (),
        events: tuple[dict[str, Any], ...] = (),
        recovered: bool = False,
        kind: str = "continue",
        defer: bool = False,
    ) -> tuple[asyncio.Task[None], Execution]:
        """Take the run (compare-and-set) with this engine as lease owner, then execute it.

        ``kind`` (``resume``, ``wake``, ``continue``, ``recover``, ``retry``) names the execution in its span.
        ``defer``: write the claim with the execution's first write instead of before it starts (see
        :class:`~agent_unit._execution.DeferredClaim`): only for a caller that waits for the
        execution and answers nobody before then, since until that write the store has no trace of
        it. Only for a plain agent: a framework's adapter may write outside the journal (LangGraph's
        checkpoints) before its first journaled call. Not while another execution of the run is in
        this process: that one's write decides. Returns the execution and its task."""
        self._engine.check_agent(record.agent)  # a broken agent's run stays as it is, for when it loads again
        expected = record.version
        now = self._engine.clock.time()
        parked = record.updated_at  # when it parked (or last changed): the resume latency's start
        deadline = record.interrupt.expires_at if record.interrupt is not None else None
        expires = now + self._engine.lease_ttl
        assign(
            record,
            status=RunStatus.running,
            interrupt=None,
            wake_at=None,
            lease_owner=self.lease_token(),
            lease_expires=expires,
            due_at=expires,
            updated_at=to_datetime(now),
        )
        if recovered:  # a crash interrupted it: the new execution shows so in its events
            record.attempt += 1
            events = (*events, ev.run_started(record.id, record.thread_id, record.attempt))
        texts = tuple(ev.dumps(event) for event in events)
        deferred = None
        if defer and record.id not in self.executions and _plain(self._engine.agents.get(record.agent)):
            deferred = DeferredClaim(expected, journal, texts, None if deadline is None else deadline.timestamp())
        else:
            await self._engine.store.save_run(record, expected_version=expected, journal=journal, events=texts)
            record.version = expected + 1
            if events:
                self._engine.tail.notify(record.id)
        self.sweeper.disarm(record.id)
        observed = telemetry.active()
        if observed is not None:
            observed.claimed(record.agent, kind, now - parked.timestamp())
        self.spawn(record, kind=kind, deferred=deferred)
        return self.executions[record.id]

    def lapses(self, record: RunRecord) -> bool:
        """Running under another process's lease, which lapses unless that process renews it."""
        owner = record.lease_owner or ""
        return record.status == RunStatus.running and not owner.startswith(f"{self._engine.owner}/")

    def ours(self, record: RunRecord) -> bool:
        """Leased by this process (any claim of it)."""
        return (record.lease_owner or "").startswith(f"{self._engine.owner}/")

    def lease_token(self) -> str:
        """This process and this claim: a step of an earlier execution of the same run in this
        process (one that outlived its lease) cannot write through a later claim's lease."""
        # 48 random bits, as hex: the base32 of a whole new_id cost 26k instructions, 1.7% of a resume
        return f"{self._engine.owner}/{os.urandom(6).hex()}"

    def spawn(
        self,
        record: RunRecord,
        *,
        fresh: bool = False,
        kind: str = "start",
        opened: Any = None,
        deferred: DeferredClaim | None = None,
    ) -> None:
        """Execute ``record`` in a task of its own; ``fresh``: created just now, so its journal is empty.
        ``kind`` and ``opened`` (the run's first span) are for telemetry (:mod:`agent_unit._otel`);
        ``deferred``: the claim, not written yet (see :meth:`claim`)."""
        self._engine.start_background()
        execution = Execution(
            record,
            self._engine.store,
            owner=record.lease_owner or self._engine.owner,
            clock=self._engine.clock,
            budget=self._engine.budget,
            max_step_bytes=self._engine.max_step_bytes,
            delta_batch_ms=self._engine.delta_batch_ms,
            notify=self._engine.tail.notify,
            approval_timeout=self._engine.approval_timeout,
            prices=self._engine.prices_for(record),
        )
        if deferred is not None:
            execution.defer(deferred)
        task = asyncio.get_running_loop().create_task(
            self._execute(execution, fresh=fresh, kind=kind, opened=opened), name=f"agent-unit {record.id}"
        )
        self.executions[record.id] = (task, execution)
        task.add_done_callback(lambda done: self.forget(record.id, done))

    def forget(self, run_id: str, task: asyncio.Task[None]) -> None:
        running = self.executions.get(run_id)
        if running is not None and running[0] is task:
            del self.executions[run_id]

    def running(self, run_id: str) -> list[str] | None:
        """The steps in flight of ``run_id``'s execution in this process, or None if it executes elsewhere."""
        running = self.executions.get(run_id)
        return None if running is None else running[1].running()

    def stop(self, run_id: str, reason: str) -> None:
        running = self.executions.get(run_id)
        if running is not None:
            task, execution = running
            execution.stop_reason = reason
            execution.signal.set()
            task.cancel()

    async def _execute(
        self, execution: Execution, *, fresh: bool = False, kind: str = "start", opened: Any = None
    ) -> None:
        record = execution.record
        observed = telemetry.active()
        if observed is not None:  # this execution's span, current while the agent runs
            execution.telemetry = observed.execution(record, kind, opened)
        task = asyncio.current_task()
        renewal = _Renewal(lambda: self._keep_lease(execution, task), self._engine.lease_ttl / 3)
        token = None
        outcome: BaseException | None = None
        try:
            agent = self._engine.agents.get(record.agent)
            if fresh:
                journal = {}
            else:
                stored = await self._engine.store.load_journal(record.id)
                if execution.deferred is not None:  # the answer, as its claim will store it
                    stored.update((entry.key, entry) for entry in execution.deferred.journal)
                journal = journal_view(stored, record.retry)
            run = Run(execution, journal)
            token = active_run.set(run)
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
                # A park is how a run stops, not an error: its traceback (the agent's frames, this
                # one among them, holding the park) is a cycle only the garbage collector would free.
                park.__traceback__ = None
                await execution.settle(self._engine.lease_ttl)  # journal steps still running beside the park first
                outcome = park
            except BaseExceptionGroup as group:  # a framework's task group wrapped the park (or a failure)
                wrapped = _park_in(group)
                if wrapped is None and not isinstance(group, Exception):
                    raise
                if wrapped is not None:
                    # As for a park above; Python 3.11's TaskGroup also keeps the group in the frame
                    # that raised it, which the group's traceback holds.
                    group.__traceback__ = wrapped.__traceback__ = None
                    await execution.settle(self._engine.lease_ttl)
                outcome = wrapped or group
            except Exception as exc:  # noqa: BLE001 - the run fails; the engine goes on
                outcome = exc
            record.usage = record_usage(priced(run.usage, execution.prices))
            self._stop_renewal(execution, renewal)  # from here on this execution only saves its outcome
            try:
                if isinstance(outcome, Park):
                    await self._park(execution, outcome)
                elif outcome is not None:
                    log.error("run %s of agent %r failed", record.id, record.agent, exc_info=outcome)
                    await self._end(
                        execution,
                        RunStatus.failed,
                        error=outcome,
                        step=run.failed_step(outcome),
                        key=run.failed_key(outcome),
                        unfinished=run.unfinished,
                    )
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
            if execution.telemetry is not None:
                execution.telemetry.end(outcome, execution.stop_reason)
            if execution.stop_reason in ("cancelled", "lost", "changed"):
                settle = asyncio.ensure_future(self._settle(execution))
                self.settling.add(settle)
                settle.add_done_callback(self.settling.discard)

    async def _settle(self, execution: Execution) -> None:
        """After a cancel: once the threads of steps this execution left running have finished, say
        so on the cancelled record (``settling`` None), if it names this execution's lease; until
        then, renew that lease, so the sweep takes its lapse for this process's end. No event: the
        run's events end with its ``RUN_CANCELLED``. A task of its own: a thread that never ends
        must not hold up a shutdown."""
        done = asyncio.ensure_future(execution.threads_done())
        try:
            while not done.done():
                await asyncio.wait([done], timeout=self._engine.lease_ttl / 3)
                if not done.done() and not await self._renew_settling(execution):
                    return  # not ours to say any more
            for _ in range(10):
                record = await self._engine.store.load_run(execution.record.id)
                if record is None or record.settling is None or record.lease_owner != execution.owner:
                    return  # not cancelled while this execution ran: taken over, or said already
                if await self.clear_settling(record):
                    return
        except Exception:
            log.exception("saying that the cancelled run %s has settled failed", execution.record.id)
        finally:
            done.cancel()

    async def _renew_settling(self, execution: Execution) -> bool:
        """Extend the lease the cancelled record keeps for this execution; False if it names no
        lease of this execution's any more (the sweep took its lapse for this process's end)."""
        for _ in range(10):
            record = await self._engine.store.load_run(execution.record.id)
            if record is None or record.settling is None or record.lease_owner != execution.owner:
                return False
            expected = record.version
            record.lease_expires = record.due_at = self._engine.clock.time() + self._engine.lease_ttl
            try:
                await self._engine.store.save_run(record, expected_version=expected)
            except RunConflict:
                continue
            return True
        return True  # busy: the next renewal tries again

    async def clear_settling(self, record: RunRecord) -> bool:
        """Say on the cancelled ``record`` (as read) that nothing of it runs any more; False if it
        changed since it was read."""
        expected = record.version
        settled(record, self._engine.retention)
        try:
            await self._engine.store.save_run(record, expected_version=expected)
        except RunConflict:
            return False
        record.version = expected + 1
        self._engine.tail.notify(record.id)
        return True

    async def _keep_lease(self, execution: Execution, task: asyncio.Task[Any] | None) -> None:
        """Renew the lease now and every third of it while the run executes; stop this execution
        if it was lost. Started once the first renewal is due (see :class:`_Renewal`)."""
        record = execution.record
        while True:
            expires = self._engine.clock.time() + self._engine.lease_ttl
            async with execution.lock:  # never cancelled in here (see _stop_renewal)
                if execution.stopping:
                    return
                if execution.deferred is not None:  # not written yet: there is no lease to renew
                    try:
                        await execution.claim_held()
                    except Cancelled:
                        return  # refused: the execution stops (its signal is set)
                try:
                    version = await self._engine.store.renew_lease(record.id, owner=execution.owner, expires=expires)
                    lost = version is None
                except Exception as exc:  # noqa: BLE001 - try again next time; the lease fence guards the gap
                    log.warning("renewing the lease of run %s failed (%s): trying again", record.id, type(exc).__name__)
                    version, lost = None, False
                if version is not None:
                    record.version = version
                    record.lease_expires = record.due_at = expires
            if lost:
                execution.stop_reason = "lost"
                execution.signal.set()
                if task is not None:
                    task.cancel()
                return
            await asyncio.sleep(self._engine.lease_ttl / 3)

    @staticmethod
    def _stop_renewal(execution: Execution, renewal: _Renewal) -> None:
        """Stop renewing before the outcome is saved, without cutting a renewal in half.

        A renewal that already holds the lock finishes and records the version it bumped;
        one that is not due yet, asleep or still waiting for the lock is cancelled.
        """
        execution.stopping = True
        renewal.cancel(timer_only=execution.lock.locked())

    async def _save(
        self, execution: Execution, *, journal: tuple[JournalEntry, ...] = (), event: dict[str, Any]
    ) -> bool:
        """Save the run's new status with its pending events; False if someone else changed it."""
        record = execution.record
        record.updated_at = to_datetime(self._engine.clock.time())  # type: ignore[assignment]
        async with execution.lock:
            events = execution.events.drain(event)
            if execution.deferred is not None:  # the execution's first write: the claim goes with it
                try:
                    await execution.claim_held(journal, events)  # notifies
                except Cancelled:
                    return False  # the run changed since the answer was checked, or the store is away
            else:
                expected = record.version  # read under the lock: a lease renewal bumps it
                while True:
                    try:
                        await self._engine.store.save_run(
                            record, expected_version=expected, journal=journal, events=events
                        )
                        break
                    except RunConflict:
                        stored = await self._engine.store.load_run(record.id)
                        if (
                            stored is None
                            or stored.status != RunStatus.running
                            or stored.lease_owner != execution.owner
                        ):
                            log.info("run %s changed while executing (cancelled or taken over); it stops", record.id)
                            execution.stop_reason = execution.stop_reason or "changed"
                            return False
                        expected = stored.version  # still ours: a message was stored meanwhile (send)
                record.version = expected + 1
                self._engine.tail.notify(record.id)
        if record.status in _LEFT:
            execution.left = record
        return True

    def finish(self, record: RunRecord, status: RunStatus) -> None:
        now = self._engine.clock.time()
        finished = to_datetime(now)
        assign(
            record,
            status=status,
            interrupt=None,
            wake_at=None,
            lease_owner=None,
            lease_expires=None,
            finished_at=finished,
            updated_at=finished,
            due_at=None if self._engine.retention is None else now + self._engine.retention,
        )

    async def _end(
        self,
        execution: Execution,
        status: RunStatus,
        *,
        output: Any = None,
        error: BaseException | None = None,
        step: str | None = None,
        key: str | None = None,
        unfinished: list[str] | None = None,
    ) -> None:
        """End the run: ``output`` is storable already (:meth:`_stored_output`); ``step`` names the
        step ``error`` came from, ``key`` its journal key (what a retry runs again). The error's text
        is scrubbed, so a failure can always be saved."""
        record = execution.record
        self.finish(record, status)
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
                type=type(error).__name__,
                message=message,
                step=step and jsontext.scrub(step),
                key=key,
                unfinished=[name for name in unfinished or () if name != key],
                frames=frames,
            )
            event = ev.run_error(message, jsontext.scrub(code))
        await self._save(execution, event=event)

    def _stored_output(self, agent: str, output: Any) -> Any:
        """The run's output as the store keeps it; ``UnstorableValue`` (the run fails) if it cannot be."""
        try:
            _, size = jsontext.encode(output)
        except ValueError as exc:
            raise UnstorableValue(f"the output of agent {agent!r} cannot be stored as JSON: {exc}") from None
        if size > self._engine.max_step_bytes:
            raise UnstorableValue(
                f"the output of agent {agent!r} is {size:,} bytes of JSON, over max_step_bytes "
                f"({self._engine.max_step_bytes:,}): store large data elsewhere (a file, a bucket, a table) "
                "and return its key"
            )
        return output

    async def _park(self, execution: Execution, park: Park) -> None:
        record = execution.record
        record.lease_owner = record.lease_expires = None
        if isinstance(park, Interrupted):
            record.status = RunStatus.interrupted
            record.interrupt = park.interrupt
            interrupt = park.interrupt
            deadline = None if interrupt.expires_at is None else interrupt.expires_at.timestamp()
            record.due_at = deadline  # a deadline is a wake like a sleep's: the sweep and timers see it
            shown = {
                "name": interrupt.name,
                "key": interrupt.key,
                "payload": interrupt.payload,
                "answerSchema": interrupt.answer_schema,
            }
            if interrupt.expires_at is not None:
                shown["expiresAt"] = interrupt.expires_at.isoformat()
            event = ev.run_interrupted(record.id, record.thread_id, shown)
            if await self._save(execution, event=event) and deadline is not None:
                await self.sweeper.schedule(record.id, deadline)
        elif isinstance(park, Sleeping):
            record.status = RunStatus.sleeping
            record.wake_at = to_datetime(park.wake_at)
            record.due_at = park.wake_at
            journal = () if park.entry is None else (park.entry,)
            event = ev.run_sleeping(record.id, record.thread_id, record.wake_at.isoformat())  # type: ignore[union-attr]
            if await self._save(execution, journal=journal, event=event):
                await self.sweeper.schedule(record.id, park.wake_at)
        elif isinstance(park, Yielded):
            record.status = RunStatus.queued
            record.due_at = (
                self._engine.clock.time() + self._engine.lease_ttl
            )  # the sweep's fallback if the continuation is lost
            if await self._save(execution, event=ev.custom("agent-unit.yield", None)):
                await self._continue(record.id)
        elif isinstance(park, Cancelled):
            pass  # whoever cancelled it (or took it over) saved the run
        else:
            error = RuntimeError(f"agent code raised {type(park).__name__}, which only agent-unit may raise")
            await self._end(execution, RunStatus.failed, error=error)

    async def _release(self, execution: Execution) -> None:
        """On shutdown: hand the run back so any process's next sweep continues it at once (a
        deferred claim goes with it: the answer is saved, and the run goes on elsewhere)."""
        record = execution.record
        record.status = RunStatus.queued
        record.lease_owner = record.lease_expires = None
        record.due_at = self._engine.clock.time()
        await self._save(execution, event=ev.custom("agent-unit.released", None))

    async def _continue(self, run_id: str) -> None:
        """Continue a yielded run: through the host's hook, or right here in a fresh execution."""
        try:
            if self._engine.on_continue is None:
                await self._engine.continue_run(run_id)  # spawned before this execution ends, so wait() follows it
            else:
                await maybe_await(self._engine.on_continue(run_id))
        except Exception:
            log.exception("continuing run %s failed; the sweep will pick it up", run_id)


class _Renewal:
    """An execution's lease renewal: a timer until the first renewal is due, a task from then on.

    Most executions end long before a third of their lease (a resume to its end takes about a
    millisecond). A timer is one heap entry; a task sleeping from the execution's start was a
    task made, stepped, cancelled and stepped again for every execution: about 1% of a resume's
    instructions over HTTP.
    """

    def __init__(self, renew: Callable[[], Coroutine[Any, Any, None]], delay: float) -> None:
        self._renew = renew
        self.task: asyncio.Task[None] | None = None
        self._timer: asyncio.Handle | None = asyncio.get_running_loop().call_later(delay, self._due)

    def _due(self) -> None:
        self._timer = None
        self.task = asyncio.ensure_future(self._renew())

    def cancel(self, *, timer_only: bool = False) -> None:
        """Stop renewing; ``timer_only``: leave a renewal already under way to finish."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.task is not None and not timer_only:
            self.task.cancel()


def _plain(agent: Agent | None) -> bool:
    """A plain agent's code, which writes only through its run (a framework's adapter may not)."""
    return agent is not None and agent.framework == "plain"


def _park_in(group: BaseExceptionGroup) -> Park | None:
    """The first park inside an exception group, as parallel tool calls in a task group raise it."""
    for exc in group.exceptions:
        found = _park_in(exc) if isinstance(exc, BaseExceptionGroup) else exc if isinstance(exc, Park) else None
        if found is not None:
            return found
    return None
