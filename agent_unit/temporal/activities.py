"""The activities of :class:`~agent_unit.temporal.workflow.RunWorkflow`: the agent runs in here.

Each activity executes the run in this worker with the native :class:`~agent_unit.RunEngine`
until it parks or ends: the journal is read from the store and replayed, so a retried activity
(its worker died, Temporal gave it to another) repeats no finished step, model call or tool call.
The engine's lease on the run fences a worker that Temporal gave up on but that still runs.
The activity heartbeats while the run executes; that is how Temporal notices a dead worker.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from temporalio import activity

from .._engine import RunEngine
from .._records import RunRecord, RunStatus
from ..errors import NotInterrupted, RunConflict, RunNotFound
from .workflow import ADVANCE, CANCEL, DELETED, EXPIRE, RESUME

__all__ = ["GONE", "RunActivities", "outcome"]

GONE: dict[str, Any] = {"status": DELETED, "wake_at": None, "interrupt": None, "deadline": None}
"""The outcome for a run the store does not have (its start failed after all, or it was deleted):
the workflow ends, instead of retrying an execution that can never find it."""


def outcome(record: RunRecord) -> dict[str, Any]:
    """What the workflow needs to know of where the run stands: its status, wake time, interrupt
    and the interrupt's deadline (epoch seconds)."""
    interrupt = record.interrupt
    expires = interrupt.expires_at if interrupt is not None else None
    return {
        "status": record.status.value,
        "wake_at": record.due_at if record.status == RunStatus.sleeping else None,
        "interrupt": interrupt.key if interrupt is not None else None,
        "deadline": expires.timestamp() if expires is not None else None,
    }


class RunActivities:
    """The activities, over ``engine`` (a native engine of this worker's agents and the shared store)."""

    def __init__(self, engine: RunEngine, *, heartbeat: float) -> None:
        self.engine = engine
        self.every = max(0.05, heartbeat / 4)

    @activity.defn(name=ADVANCE)
    async def advance(self, run_id: str) -> dict[str, Any]:
        """Execute the run from where it stands until it parks or ends."""
        async with self._executing(run_id):
            try:
                return outcome(await self.engine.advance(run_id))
            except RunNotFound:
                return GONE

    @activity.defn(name=RESUME)
    async def resume(
        self, run_id: str, key: str, answer: Any, by: str | None = None, at: float | None = None
    ) -> dict[str, Any]:
        """Answer the interrupt ``key`` (``by``: who answered; ``at``: when the workflow took the
        answer, which decides whether it came before a deadline) and execute the run on; on a
        retry, the answer is in already."""
        async with self._executing(run_id):
            try:
                try:
                    record = await self.engine.resume(
                        run_id, answer, interrupt_key=key, wait=True, answered_by=by, accepted_at=at
                    )
                except (NotInterrupted, RunConflict):  # a retry: the first attempt saved the answer
                    record = await self.engine.advance(run_id)
            except RunNotFound:
                return GONE
            return outcome(record)

    @activity.defn(name=EXPIRE)
    async def expire(self, run_id: str, key: str) -> dict[str, Any]:
        """Expire the interrupt ``key`` (its deadline passed unanswered: the workflow's timer fired)
        as the native engine's sweep does, and execute the run on; on a retry, it is expired already."""
        async with self._executing(run_id):
            try:
                record = await self.engine.get(run_id)
                interrupt = record.interrupt
                waits = record.status == RunStatus.interrupted and interrupt is not None and interrupt.key == key
                if waits and interrupt is not None and interrupt.expires_at is not None:
                    early = interrupt.expires_at.timestamp() - self.engine.clock.time()
                    if early > 0:  # this worker's clock is behind Temporal's timer
                        await asyncio.sleep(early)
                    try:
                        await self.engine.expire_now(record)
                        return outcome(await self.engine.wait(run_id))
                    except RunConflict:
                        pass  # changed meanwhile (a cancel): see where it stands
                return outcome(await self.engine.advance(run_id))
            except RunNotFound:
                return GONE

    @activity.defn(name=CANCEL)
    async def cancel(self, run_id: str) -> None:
        """Save the run as cancelled (Temporal cancelled its workflow), unless it has ended already,
        and stop its execution here if this worker has one."""
        with contextlib.suppress(RunConflict, RunNotFound):
            await self.engine.cancel(run_id)
        self.engine.stop(run_id)  # cancelled through agent-unit: saved already, so cancel() left it

    @contextlib.asynccontextmanager
    async def _executing(self, run_id: str) -> AsyncIterator[None]:
        """Heartbeat while the run executes; stop the execution if Temporal cancels the activity
        (its workflow was cancelled), not when the worker shuts down (the engine hands it back)."""

        async def beat() -> None:
            while True:
                activity.heartbeat()
                await asyncio.sleep(self.every)

        task = asyncio.ensure_future(beat())
        try:
            yield
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if details is not None and details.cancel_requested:
                self.engine.stop(run_id)
            raise
        finally:
            task.cancel()
