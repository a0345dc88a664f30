"""``RunWorkflow``: one Temporal workflow per run (workflow id = run id) that drives it.

The agent's code never runs in here: Temporal's workflow sandbox replays workflow code and would
make every framework deterministic-safe first. The workflow only decides what happens next, and
each execution of the agent is an activity (:mod:`agent_unit.temporal.activities`) that replays
the run's journal from the store and runs until the run parks or ends, as the native engine does:

- the run sleeps: a Temporal timer, then an activity wakes it (no agent-unit process holds it);
- the run waits at an interrupt: the ``resume`` Update answers it; its validator refuses a second
  answer, or an answer for another interrupt, before anything is written (exactly one resume);
- the interrupt has a deadline (``run.interrupt(..., timeout=)``, an adapter's ``approval_timeout``):
  the wait for the Update is also a Temporal timer; when it fires first, an activity expires the
  interrupt as the native engine's sweep does, and a later answer is refused as expired;
- the workflow is cancelled (agent-unit's cancel, or Temporal's own UI and CLI): an activity
  saves the run as cancelled, if it is not already, and the workflow ends cancelled.

This module imports only the standard library and ``temporalio``: it is loaded in the sandbox.
Activities are named by string, so the engine is never imported here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ApplicationError, is_cancelled_exception

__all__ = [
    "ADVANCE",
    "AGENT",
    "CANCEL",
    "DELETED",
    "EXPIRE",
    "EXPIRED",
    "RESUME",
    "RUN_WORKFLOW",
    "STATUS",
    "THREAD",
    "RunWorkflow",
]

RUN_WORKFLOW = "agent-unit.run"
ADVANCE = "agent-unit.advance"
RESUME = "agent-unit.resume"
CANCEL = "agent-unit.cancel"
EXPIRE = "agent-unit.expire"
AGENT = SearchAttributeKey.for_keyword("AgentUnitAgent")
THREAD = SearchAttributeKey.for_keyword("AgentUnitThread")
STATUS = SearchAttributeKey.for_keyword("AgentUnitStatus")
"""Search attributes (``search_attributes = true``; registered on the namespace beforehand): a
query like ``AgentUnitStatus = 'interrupted'`` in Temporal's UI or ``temporal workflow list``."""
CONFLICT = "RunConflict"
"""The type of the error an Update is refused with: agent-unit answers it with 409."""
EXPIRED = "InterruptExpired"
"""The type of the error an Update for an interrupt past its deadline is refused with (409
``interrupt_expired``, as natively)."""

_PARKED = ("interrupted", "sleeping")
DELETED = "deleted"
"""An execution found no run: it was never kept (its start failed after all) or was deleted."""
_FINISHED = ("completed", "failed", "cancelled", DELETED)
# An execution runs as long as the agent does; heartbeats, not this, find a dead worker.
_EXECUTION_LIMIT = timedelta(days=3650)
_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_interval=timedelta(minutes=1)
)


@workflow.defn(name=RUN_WORKFLOW)
class RunWorkflow:
    """Drives one run: executions as activities, sleeps as timers, answers as Updates."""

    def __init__(self) -> None:
        self.waiting_at: str | None = None  # the interrupt the run is parked at, once an execution said so
        # The accepted answer, who gave it and when (the workflow's time), until an execution takes it.
        self.answer: tuple[str, Any, str | None, float] | None = None
        self.taken: str | None = None  # the interrupt whose answer an execution took last
        self.answered: list[str] = []  # every interrupt answered: a late second answer is refused
        self.expired: list[str] = []  # every interrupt whose deadline passed: a late answer is refused
        self.ended = False
        self.searchable = False
        self.settled = 0  # executions that ended with the run parked or finished: what a waiter waits for

    @workflow.run
    async def run(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params``: ``run_id`` and ``heartbeat`` (seconds): a worker silent this long is replaced."""
        run_id = params["run_id"]
        heartbeat = timedelta(seconds=float(params.get("heartbeat", 30)))
        self.answered = list(params.get("answered", []))
        self.expired = list(params.get("expired", []))
        self.settled = int(params.get("settled", 0))
        self.searchable = bool(params.get("search_attributes", False))
        try:
            outcome = await self._execute(ADVANCE, [run_id], heartbeat)
            while outcome["status"] not in _FINISHED:
                self._show(outcome["status"])
                if workflow.info().is_continue_as_new_suggested() and outcome["status"] in _PARKED:
                    kept = {"answered": self.answered[-100:], "expired": self.expired[-100:], "settled": self.settled}
                    workflow.continue_as_new({**params, **kept})
                if outcome["status"] == "sleeping":
                    delay = float(outcome["wake_at"]) - workflow.now().timestamp()
                    if delay > 0:
                        await workflow.sleep(delay)
                    outcome = await self._execute(ADVANCE, [run_id], heartbeat)
                elif outcome["status"] == "interrupted":
                    key = outcome["interrupt"]
                    self.waiting_at = key
                    if not await self._answer_in_time(key, outcome.get("deadline")):
                        self.waiting_at = None
                        self.expired.append(key)
                        outcome = await self._execute(EXPIRE, [run_id, key], heartbeat)
                        continue
                    assert self.answer is not None
                    _, answer, by, at = self.answer
                    self.answer, self.waiting_at, self.taken = None, None, key
                    outcome = await self._execute(RESUME, [run_id, key, answer, by, at], heartbeat)
                else:  # queued (yielded at its budget) or still running: execute it on
                    outcome = await self._execute(ADVANCE, [run_id], heartbeat)
            self._show(outcome["status"])
            self.ended = True
            await workflow.wait_condition(workflow.all_handlers_finished)  # waiters hear the end first
            return outcome
        except BaseException as exc:
            if not is_cancelled_exception(exc):
                raise
            # Cancelled in Temporal (or by agent-unit, which saved it first): the run ends cancelled.
            await workflow.execute_activity(
                CANCEL, run_id, start_to_close_timeout=timedelta(minutes=1), retry_policy=_RETRY
            )
            self._show("cancelled")
            self.ended = True
            await workflow.wait_condition(workflow.all_handlers_finished)  # waiters hear the end first
            raise
        finally:
            self.ended = True

    async def _answer_in_time(self, key: str, deadline: float | None) -> bool:
        """Wait for the answer to ``key`` until ``deadline`` (epoch seconds; None: for good): whether
        it came. An answer accepted as the timer fires came in time."""
        if deadline is None:
            await workflow.wait_condition(self._answered(key))
            return True
        delay = deadline - workflow.now().timestamp()
        if delay > 0:
            with contextlib.suppress(TimeoutError):  # the deadline came first
                await workflow.wait_condition(self._answered(key), timeout=delay)
        return self._answered(key)()

    def _show(self, status: str) -> None:
        """The run's status as a search attribute, when the namespace has them."""
        if self.searchable:
            workflow.upsert_search_attributes([STATUS.value_set(status)])

    async def _execute(self, activity: str, args: list[Any], heartbeat: timedelta) -> dict[str, Any]:
        result: dict[str, Any] = await workflow.execute_activity(
            activity,
            args=args,
            start_to_close_timeout=_EXECUTION_LIMIT,
            heartbeat_timeout=heartbeat,
            retry_policy=_RETRY,
        )
        if result["status"] in _PARKED or result["status"] in _FINISHED:
            self.settled += 1
        return result

    @workflow.update(name="settled")
    async def until_settled(self, above: int) -> int:
        """Return once more than ``above`` executions have ended with the run parked or finished
        (``?wait=1``: the caller reads the run once then, instead of polling the store)."""
        await workflow.wait_condition(lambda: self.settled > above or self.ended)
        return self.settled

    @workflow.update(name="resume")
    async def resume(self, key: str, answer: Any, by: str | None = None) -> int:
        """Answer the interrupt ``key`` (``by``: who answered); returns once an execution took the
        answer, with the count of settled executions then (what a waiter for the next park waits above)."""
        self._check(key)  # again: several Updates may pass their validators before one runs
        self.answer = (key, answer, by, workflow.now().timestamp())
        self.answered.append(key)
        await workflow.wait_condition(lambda: self.ended or self.taken == key or self._mismatch(key))
        if self.taken != key:
            if self.answer is not None and self.answer[0] == key:
                self.answer = None
            raise ApplicationError(f"the run no longer waits at {key}", type=CONFLICT, non_retryable=True)
        return self.settled

    @resume.validator
    def check_resume(self, key: str, answer: Any, by: str | None = None) -> None:
        """Refuse, before anything is written, an answer when one was accepted already."""
        self._check(key)

    def _check(self, key: str) -> None:
        if key in self.expired:
            raise ApplicationError(f"the interrupt {key} expired", type=EXPIRED, non_retryable=True)
        if self.ended or self.answer is not None or key in self.answered:
            raise ApplicationError(f"the interrupt {key} was answered already", type=CONFLICT, non_retryable=True)
        if self.waiting_at is not None and self.waiting_at != key:
            raise ApplicationError(f"the run waits at {self.waiting_at}, not {key}", type=CONFLICT, non_retryable=True)

    def _answered(self, key: str) -> Callable[[], bool]:
        return lambda: self.answer is not None and self.answer[0] == key

    def _mismatch(self, key: str) -> bool:
        """The run parked at another interrupt than the one this answer is for."""
        return self.waiting_at is not None and self.waiting_at != key

    @workflow.query(name="waiting_at")
    def waiting(self) -> str | None:
        """The interrupt the run waits at, as this workflow knows it."""
        return self.waiting_at
