"""``TemporalEngine``: the engine of an app whose runs Temporal drives (``[temporal]`` in the config).

It is a :class:`~agent_unit.RunEngine` for everything that reads (runs, events, the
manifest) and for messages; what changes where a run stands goes through Temporal:

- ``start`` stores the run (queued) and starts its workflow (workflow id = run id);
- ``resume`` checks the answer against the interrupt's schema (422, nothing sent), then sends
  the workflow's ``resume`` Update: Temporal runs one Update of a workflow at a time and its
  validator refuses a second answer, so exactly one resume wins (409 for the others);
- ``cancel`` saves the run as cancelled (a compare-and-set, as the native engine does) and
  cancels its workflow;
- nothing sweeps: Temporal's timers wake sleepers and its retries replace dead workers.

The agents run in workers (:mod:`agent_unit.temporal.worker`); with ``worker=True`` this process
runs one too, from ``start_background()`` (``agent-unit dev``, the ``server`` build).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import _events as ev
from .. import telemetry
from .._answers import check_answer
from .._deadlines import late_answer
from .._engine import RunEngine, SweepResult
from .._limits import Limits
from .._records import RunRecord, RunStatus
from ..errors import EngineUnavailable, NotInterrupted, RunConflict
from .settings import TemporalSettings
from .workflow import AGENT, CONFLICT, EXPIRED, RUN_WORKFLOW, STATUS, THREAD

if TYPE_CHECKING:
    from temporalio.client import Client

__all__ = ["TemporalEngine"]

log = logging.getLogger("agent_unit")

_MOVING = (RunStatus.queued, RunStatus.running)


class TemporalEngine(RunEngine):
    """A :class:`~agent_unit.RunEngine` whose runs are Temporal workflows (see the module).

    ``temporal``: the server; ``worker``: also run a worker in this process from
    ``start_background()`` until ``aclose()``; ``client``: a connected client to use (tests).
    """

    def __init__(
        self,
        agents: Mapping[str, Any],
        store: Any = None,
        *,
        temporal: TemporalSettings | None = None,
        worker: bool = False,
        client: Client | None = None,
        **options: Any,
    ) -> None:
        options["background_sweep"] = False  # Temporal wakes and recovers runs: nothing sweeps here
        super().__init__(agents, store, **options)
        self.temporal = temporal or TemporalSettings()
        self.runs_worker = worker
        self._client = client
        self._connecting = asyncio.Lock()
        self._worker: asyncio.Task[None] | None = None
        self._deleting: asyncio.Task[None] | None = None

    async def client(self) -> Client:
        """The Temporal client, connected at first use."""
        async with self._connecting:
            if self._client is None:
                self._client = await self.temporal.connect()
        return self._client

    @property
    def task_queue(self) -> str:
        """The task queue runs are started on (``${NAME}`` expanded: it is read where the app runs)."""
        return self.temporal.expanded().task_queue

    async def check_store(self) -> None:
        """Reach the store, and Temporal where this process runs a worker, so bad configuration fails
        at start (one line, no traceback); reading runs needs only the store."""
        await super().check_store()
        if self.runs_worker:
            await self.client()

    async def start(
        self,
        agent: str,
        input: Any,
        *,
        thread_id: str | None = None,
        wait: bool = False,
        limits: Limits | Mapping[str, Any] | None = None,
    ) -> RunRecord:
        """Store the run and start its workflow; ``EngineUnavailable`` (503, no run kept) if Temporal
        cannot be reached."""
        record = await self.create(agent, input, thread_id=thread_id, limits=limits)
        try:
            await self._start_workflow(record)
        except EngineUnavailable:
            await self.discard(record.id)
            raise
        if (observed := telemetry.active()) is not None:  # started once Temporal took it, not if it refused
            observed.started(record.agent)
        return await self.wait(record.id) if wait else record

    async def _start_workflow(self, record: RunRecord, *, again: bool = False) -> None:
        """Start the run's workflow (``again``: a retry's, in place of the closed one of the failed
        run, or of one still closing); ``EngineUnavailable`` if Temporal cannot be reached or refuses."""
        from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy

        searchable = self.temporal.search_attributes
        params = {"run_id": record.id, "heartbeat": self.temporal.heartbeat_seconds, "search_attributes": searchable}
        attributes = [
            SearchAttributePair(AGENT, record.agent),
            SearchAttributePair(THREAD, record.thread_id),
            SearchAttributePair(STATUS, "queued"),
        ]
        # A failed run's workflow returns once the failure is saved: a retry at once may find it
        # still closing, with nothing left to do. Only the retry that won the run's compare-and-set
        # gets here, so replacing it never replaces a live one.
        conflict = WorkflowIDConflictPolicy.TERMINATE_EXISTING if again else WorkflowIDConflictPolicy.FAIL
        try:
            client = await self.client()
            await client.start_workflow(
                RUN_WORKFLOW,
                params,
                id=record.id,
                task_queue=self.task_queue,
                memo={"agent": record.agent, "thread_id": record.thread_id},
                search_attributes=TypedSearchAttributes(attributes if searchable else []),
                static_summary=f"agent-unit run of {record.agent}",
                id_conflict_policy=conflict,
            )
        except EngineUnavailable:
            raise
        except Exception as exc:
            log.exception("starting the workflow of run %s failed", record.id)
            raise EngineUnavailable(f"Temporal refused to start run {record.id} ({type(exc).__name__})") from None

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
        """Answer the run's interrupt through its workflow's ``resume`` Update (see the module);
        ``answered_by`` goes with it, and the activity that takes the answer records it. An answer
        after the interrupt's deadline is refused (``InterruptExpired``, 409), as natively. ``record``
        is not used: the interrupt's key sent with the Update is read here, fresh."""
        from temporalio.client import WorkflowUpdateFailedError
        from temporalio.service import RPCError

        record = await self.get(run_id)
        late = late_answer(record, self.clock.time() if accepted_at is None else accepted_at)
        if late is not None:
            raise late
        if record.status != RunStatus.interrupted or record.interrupt is None:
            raise NotInterrupted(f"run {run_id} is {record.status.value}, not interrupted: there is nothing to resume")
        key = record.interrupt.key
        deadline = record.interrupt.expires_at
        if interrupt_key is not None and interrupt_key != key:
            raise RunConflict(f"run {run_id} no longer waits at {interrupt_key} (now: {key}): read the run again")
        check_answer(record, answer, limit=self.max_step_bytes)  # a bad answer: 422, nothing sent
        handle = (await self.client()).get_workflow_handle(run_id)
        try:
            settled = await handle.execute_update("resume", args=[key, answer, answered_by], result_type=int)
        except WorkflowUpdateFailedError as exc:
            refused = getattr(exc.cause, "type", None)
            if refused == EXPIRED and deadline is not None:  # its timer fired while this answer was on its way
                raise late_answer(record, deadline.timestamp()) or RunConflict(f"run {run_id} moved on") from None
            if refused == CONFLICT:
                raise RunConflict(f"run {run_id} was resumed already: read the run again") from None
            raise
        except RPCError as exc:
            now = await self.get(run_id)
            late = late_answer(now, self.clock.time())
            if late is not None:
                raise late from None
            if now.status != RunStatus.interrupted or now.interrupt is None or now.interrupt.key != key:
                # Its workflow moved on, or ended, while this answer was on its way: another won.
                raise RunConflict(f"run {run_id} was resumed already: read the run again") from None
            log.warning("the resume Update of run %s failed: %s %s", run_id, exc.status.name, exc.message)
            raise EngineUnavailable(f"Temporal did not take the answer for run {run_id}: {exc.message}") from None
        if wait:
            return await self.wait(run_id, after=record.version, settled=settled or 0)
        return await self._taken(record)

    async def _until_settled(self, run_id: str, above: int) -> None:
        """Wait for the run's workflow to say it settled (see :meth:`wait`); return at once if it cannot."""
        from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
        from temporalio.service import RPCError

        try:
            handle = (await self.client()).get_workflow_handle(run_id)
            await handle.execute_update("settled", above, result_type=int)
        except (WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError, RPCError, EngineUnavailable):
            pass  # closed (the run ended), or Temporal out of reach: the store says where the run stands

    async def _taken(self, record: RunRecord, *, limit: float = 10.0) -> RunRecord:
        """The run once a worker saved the answer its workflow took (the store moved past ``record``),
        so a reader that comes next finds it running, not still parked; as sent, after ``limit``
        seconds with no worker to take it (the answer is in Temporal: it is taken when one comes)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while True:
            waiter = self.tail.listen(record.id)
            now = await self.get(record.id)
            if now.version > record.version:
                return now
            if loop.time() >= deadline:
                record.status, record.interrupt = RunStatus.running, None
                return record
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.wait(), 1.0 if self.tail.hearing else 0.02)

    async def cancel(self, run_id: str, *, interrupt_key: str | None = None, settle: float = 5.0) -> RunRecord:
        """Save the run as cancelled, then cancel its workflow (which, if it is already cancelling, does nothing)."""
        from temporalio.service import RPCError

        record = await super().cancel(run_id, interrupt_key=interrupt_key, settle=0)
        try:
            await (await self.client()).get_workflow_handle(run_id).cancel()
        except (RPCError, EngineUnavailable) as exc:
            # Saved as cancelled already: the workflow ends at its next execution, which sees so.
            log.warning("cancelling the workflow of run %s failed: %s", run_id, exc)
        return record

    async def wait(self, run_id: str, *, after: int = 0, settled: int = 0) -> RunRecord:
        """Wait until the run, at a version above ``after``, parks or ends (wherever it executes).

        Its workflow's ``settled`` Update returns once an execution after the first ``settled``
        has ended with the run parked or finished, so the store is read once then, not polled;
        the store is watched only where that Update gets no answer (the workflow has closed)."""
        await self._until_settled(run_id, settled)
        while True:
            waiter = self.tail.listen(run_id)
            record = await self.get(run_id)
            if record.version > after and record.status not in _MOVING:
                return record
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.wait(), 1.0 if self.tail.hearing else 0.05)

    async def retry(self, run_id: str, *, wait: bool = False) -> RunRecord:
        """Retry a failed run from the work that failed (see :meth:`RunEngine.retry`) in a new
        workflow of the same id: the retry is saved first, one compare-and-set, so of concurrent
        retries exactly one wins (409 for the others) and starts it. If Temporal refuses the start,
        the run is failed again as it was (``EngineUnavailable``, 503: retry it later)."""
        before = await self.get(run_id)
        record = await self.queue_retry(run_id)
        try:
            await self._start_workflow(record, again=True)
        except EngineUnavailable:
            await self._unqueue(record, before)
            raise
        return await self.wait(run_id, after=record.version) if wait else record

    async def _unqueue(self, record: RunRecord, before: RunRecord) -> None:
        """Fail the run again as ``before`` (its retry's workflow did not start), unless it moved on."""
        record.status, record.error, record.retry = RunStatus.failed, before.error, before.retry
        record.attempt, record.finished_at, record.due_at = before.attempt, before.finished_at, before.due_at
        message = before.error.message if before.error is not None else "the run failed"
        event = ev.dumps(ev.run_error(message, before.error.type if before.error is not None else "error"))
        try:
            await self.store.save_run(record, expected_version=record.version, events=[event])
        except RunConflict:
            log.warning("run %s changed before its retry could be undone", record.id)
        self.tail.notify(record.id)

    async def sweep(self, *, wait: bool = False, limit: int = 500, lapsing: bool = False) -> SweepResult:
        """Delete the finished runs past ``retention``; nothing else: Temporal's timers wake
        sleepers and its retries recover runs (a due run that is not finished is Temporal's)."""
        result = SweepResult()
        deleted: list[str] = []
        for record in await self.store.due_runs(before=self.clock.time(), limit=limit):
            if record.finished:
                await self.store.delete_run(record.id)
                deleted.append(record.id)
        result.deleted, result.run_ids = len(deleted), tuple(deleted)
        return result

    def start_background(self) -> None:
        """Start this process's worker, if it runs one (``worker=True``), and with ``retention``
        the loop that deletes finished runs past it (every ``sweep_interval``)."""
        loop = asyncio.get_running_loop()
        if self.runs_worker and (self._worker is None or self._worker.done() or self._worker.get_loop() is not loop):
            self._worker = loop.create_task(self._run_worker(), name="agent-unit temporal worker")
        if self.retention is not None and (
            self._deleting is None or self._deleting.done() or self._deleting.get_loop() is not loop
        ):
            self._deleting = loop.create_task(self._delete_old(), name="agent-unit retention")

    async def _delete_old(self) -> None:
        while True:
            try:
                await self.sweep()
            except Exception:
                log.exception("deleting finished runs past retention failed")
            await asyncio.sleep(self.sweep_interval)

    async def _run_worker(self) -> None:
        """This process's worker, started again (after 1, 2, 4... up to 30 s) if it stops: Temporal
        out of reach at boot, or lost for a while, leaves the app serving and the worker waiting."""
        from .worker import run_worker, worker_engine

        engine = worker_engine(self, self.temporal)
        pause = 1.0
        try:
            while True:
                try:
                    await run_worker(engine, self.temporal, client=await self.client())
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - logged, then the worker starts again
                    log.warning(
                        "the Temporal worker of this process stopped (%s): starting it again in %.0f s", exc, pause
                    )
                await asyncio.sleep(pause)
                pause = min(pause * 2, 30.0)
        finally:
            await engine.aclose()

    async def aclose(self) -> None:
        for task in (self._worker, self._deleting):
            if task is not None and task.get_loop() is asyncio.get_running_loop():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._worker = self._deleting = None
        await super().aclose()
