"""The run primitives: what agent code calls on ``run`` (or ``use_run()``).

Every primitive is keyed by its name and how many times that name was used before in the
run (``step:load-order#0``), so a replay finds the same entries in the same order, and
``asyncio.gather`` over steps is deterministic as long as the calls are made in the same
order: the key is taken when ``run.step(...)`` is *called*, not when it is awaited.

Parking (an interrupt, a sleep, a budget yield, a cancellation) unwinds the agent with a
:class:`~agent_unit.Park`, a ``BaseException``, so an ``except Exception:`` in user code cannot
swallow it.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from inspect import CO_COROUTINE
from time import time_ns
from types import FunctionType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from pydantic import ValidationError
from pydantic.alias_generators import to_snake

from . import _jsontext as jsontext
from . import env
from ._answers import type_ref
from ._callables import call, return_annotation, wants_context
from ._clock import floor_datetime, to_datetime, to_epoch
from ._codec import UNTYPED, answer_schema, decode, encode, encode_error, error_event, rebuild_error
from ._deadlines import expired_at
from ._durations import Duration, parse_duration
from ._events import MESSAGE, custom, dumps, step_finished, step_retry, step_started, step_text
from ._limits import LIMIT_REACHED, Limits, first_passed
from ._parks import Cancelled, Interrupted, Sleeping
from ._records import Interrupt, JournalEntry, agui_usage
from ._retries import check_new_work
from ._retry import RetryPolicy
from ._usage import COUNTS, merge_usage
from .errors import (
    AgentUnitError,
    InterruptExpired,
    LimitReached,
    NonDeterminismError,
    RunConflict,
    StepResultError,
    StoreUnavailable,
    UnstorableValue,
)

if TYPE_CHECKING:
    from ._execution import Execution

__all__ = [
    "UNTYPED",  # the adapter API names it here (agent_unit.run.UNTYPED)
    "Run",
    "RunState",
    "Secrets",
    "StepContext",
    "STEP_STARTED_WAIT",
    "STEP_THREADS",
    "active_run",
    "current_run",
    "current_step",
    "idempotency_key",
    "use_run",
]

T = TypeVar("T")
Scope = str  # "thread" | "agent" | "app"

active_run: ContextVar[Run | None] = ContextVar("agent_unit_run", default=None)
"""The run executing in this context. Whatever executes an agent sets it around the call (the
engine does; so would an engine of one's own), and :func:`use_run` and :func:`current_run` read it."""
_current_step: ContextVar[StepContext | tuple[str, str, str, int] | None] = ContextVar("agent_unit_step", default=None)
"""The step running now: its :class:`StepContext`, or until one is asked for, the tuple of its
fields ``(name, key, run_id, attempt)``. Most step functions never ask for it, and the frozen
dataclass costs a microsecond to make (four ``object.__setattr__``), a tenth of a no-op step's engine time."""


def use_run() -> Run:
    """The run executing now; call it anywhere inside an agent, a step or a tool."""
    run = active_run.get()
    if run is None:
        raise RuntimeError("use_run() was called outside a run: call it from code an agent runs")
    return run


def current_run() -> Run | None:
    """The run executing now, or ``None`` outside one: for code that runs both inside and outside
    runs (a test's effect recorder, a library's logging), where :func:`use_run` would raise."""
    return active_run.get()


def current_step() -> StepContext | None:
    """The step, model or tool call running now (its name and journal key), or ``None`` between them.

    An adapter uses it to name what a journaled call streams (a model call's text message ids
    derive from ``current_step().key``, so they are the same when the call runs again).
    """
    found = _current_step.get()
    if isinstance(found, tuple):
        found = StepContext(*found)
        _current_step.set(found)  # made once per step: every caller gets the same object
    return found


# -- steps --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a step function may ask for: its name and an idempotency key for the APIs it calls."""

    name: str
    key: str
    run_id: str
    attempt: int

    @property
    def idempotency_key(self) -> str:
        """Stable across re-runs of this step; different for every other step and run."""
        return idempotency_key(self.run_id, self.key)


def idempotency_key(run_id: str, key: str) -> str:
    """The idempotency key of the work journaled under ``key`` in run ``run_id``: what
    ``run.idempotency_key()`` returns inside that work."""
    return hashlib.sha256(f"{run_id}\x00{key}".encode()).hexdigest()[:40]


STEP_STARTED_WAIT = 0.05
"""Seconds a step's STEP_STARTED waits in the buffer before it is written on its own.

A step that finishes sooner (a no-op, a cache hit, a quick sync call in its worker thread)
writes STEP_STARTED and STEP_FINISHED in its one commit; a slower one shows STEP_STARTED live
after this wait, at the granularity of ``delta_batch_ms``'s default. Flushing at the loop's next
turn instead cost a sync step a second commit: its thread hop always yields to the loop."""

STEP_THREADS = sys.platform != "emscripten"
"""Whether sync step functions run in worker threads; False runs them inline (Pyodide, in Workers, has none)."""

# Events batched for ``delta_batch_ms`` so that deltas close together are stored as one.
_step_parts: dict[str, tuple[str, Callable[[dict[str, Any] | None], dict[str, Any]]]] = {}
_MAX_STEP_NAMES = 4096


def _parts_of(name: str) -> tuple[str, Callable[[dict[str, Any] | None], dict[str, Any]]]:
    """What errors call a step's result, and the function that makes its STEP_FINISHED: the same
    for every step of that name, so made once per name (a run's steps repeat a few names)."""
    parts = (f"the result of step {name!r}", functools.partial(step_finished, name))
    try:
        if len(_step_parts) >= _MAX_STEP_NAMES:
            _step_parts.clear()
        _step_parts[name] = parts
    except TypeError:
        pass  # unhashable: refused as a name further on
    return parts


_DELTAS = frozenset({"TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS", "REASONING_MESSAGE_CONTENT"})


# -- state and secrets ----------------------------------------------------------------------


class RunState:
    """Key-value state scoped to the run's thread (default), its agent, or the whole app."""

    def __init__(self, run: Run) -> None:
        # What it needs of the run, not the run itself: ``run.state`` is this object, and a cycle
        # would leave every execution's objects (record, journal, buffers) to the cyclic garbage
        # collector instead of freeing them as the execution ends (measured: ~2% of a resume).
        self._thread_id: str = run.thread_id
        self._agent: str = run.agent
        self._store = run._execution.store
        self._signal: asyncio.Event = run.signal
        self._claim = run._execution.claim  # a write: a resume's deferred claim goes first

    def _scope(self, scope: Scope, key: str) -> str:
        if not isinstance(key, str) or not jsontext.storable_name(key):
            raise UnstorableValue(f"state key {jsontext.scrub(repr(key))} cannot be stored: use a string without NUL")
        if scope == "thread":
            return f"thread:{self._thread_id}"
        if scope == "agent":
            return f"agent:{self._agent}"
        if scope == "app":
            return "app"
        raise ValueError(f"unknown state scope {scope!r}: use 'thread', 'agent' or 'app'")

    async def get(self, key: str, default: Any = None, *, scope: Scope = "thread") -> Any:
        text = await self._reach(self._store.get_state(self._scope(scope, key), key))
        return default if text is None else json.loads(text)

    async def set(self, key: str, value: Any, *, scope: Scope = "thread") -> None:
        """Store ``value`` (JSON data); ``UnstorableValue`` if a store cannot keep it."""
        where = self._scope(scope, key)
        try:
            text, _ = jsontext.encode(value)
        except ValueError as exc:
            raise UnstorableValue(f"the value of state {key!r} cannot be stored as JSON: {exc}") from None
        await self._claim()
        await self._reach(self._store.set_state(where, key, text))

    async def delete(self, key: str, *, scope: Scope = "thread") -> None:
        where = self._scope(scope, key)
        await self._claim()
        await self._reach(self._store.delete_state(where, key))

    async def _reach(self, call: Awaitable[T]) -> T:
        """A state call. A store out of reach stops this execution, as a failed commit does: the
        run is recovered from its journal once its lease lapses, not failed for an outage."""
        try:
            return await call
        except StoreUnavailable:
            self._signal.set()
            raise Cancelled() from None


class Secrets:
    """Secrets from the host environment (process variables, or Workers bindings)."""

    def get(self, name: str, default: str | None = None) -> str | None:
        value: str | None = env.get(name, default)
        return value


# -- the run --------------------------------------------------------------------------------


class Run:
    """A run as its agent sees it. Created by the engine for each execution."""

    def __init__(self, execution: Execution, journal: dict[str, JournalEntry]) -> None:
        record = execution.record
        self.id: str = record.id
        self.thread_id: str = record.thread_id
        self.agent: str = record.agent
        self.attempt: int = record.attempt
        self.signal: asyncio.Event = execution.signal
        self._execution = execution
        self.state = RunState(self)
        self.secrets = Secrets()
        self._journal = journal
        self._unreplayed = len(journal)
        self._seen: dict[str, int] = {}
        # For frameworks that checkpoint their own work (LangGraph): names the unit running now.
        self._work_key: Callable[[], str | None] | None = None
        # Token usage of every journaled model call, replayed ones included: the run's total.
        self._usage: list[dict[str, Any]] = [
            entry.meta["usage"] for entry in journal.values() if entry.meta and "usage" in entry.meta
        ]
        # The errors steps raised to agent code (by id: exceptions take no weak references), so
        # the run's error can name the step it came from.
        self._step_errors: dict[int, tuple[BaseException, str, str | None]] = {}
        self._messages_after = 0  # the seq of the last event run.messages() has read
        self._running: set[str] = set()  # keys of new work started and not journaled yet
        self._limits = record.limits  # raised by each journaled answer to limit-reached, in replay order
        self._model_calls = 0  # model calls reached so far (replayed or made)
        self.shown_tool_calls: set[str] = set()
        """Ids of tool calls whose ``TOOL_CALL_START``/``ARGS``/``END`` this run showed before the
        call ran (at its approval, see :func:`agent_unit.adapters.approval.ask_approval`): when the
        call runs, ``ctx.durable.tools`` adds only its ``TOOL_CALL_RESULT``, so a UI sees it once."""

    @property
    def usage(self) -> list[dict[str, Any]]:
        """Token usage so far, one entry per provider and model (AG-UI ``TokenUsage`` fields)."""
        return merge_usage(self._usage)

    @property
    def approval_timeout(self) -> float | None:
        """Seconds a tool approval waits for an answer (the deployment's ``approval_timeout``), or None:
        for adapters, which pass it as the ``timeout`` of their ``tool-approval`` interrupt."""
        return self._execution.approval_timeout

    @property
    def replaying(self) -> bool:
        """True while journaled work is being replayed (nothing new has run yet)."""
        return self._unreplayed > 0

    def next_key(self, kind: str, name: str) -> str:
        """The journal key of the next ``kind`` of work named ``name``: ``"{kind}:{name}#{n}"``.

        ``n`` counts the earlier uses of that name in the run, so a replay finds the same keys
        in the same order. An adapter takes a key when a call is *made*, before awaiting it,
        and passes it to :meth:`journaled` (``ctx.durable`` does this for model, tool and value
        calls). Inside a framework's unit of work (see :meth:`set_work_key`) keys count within
        that unit: a resume skips finished units, so run-wide counts would shift.
        """
        work = self._work_key() if self._work_key is not None else None
        base = f"{kind}:{name}" if work is None else f"{work}/{kind}:{name}"
        count = self._seen.get(base, 0)
        self._seen[base] = count + 1
        return f"{base}#{count}"

    def _replayed(self, key: str) -> JournalEntry | None:
        entry = self._journal.get(key)
        if entry is not None:
            self._unreplayed -= 1
        return entry

    def _storable(self, value: Any, what: str) -> str:
        """``value`` as JSON text a store keeps, at most ``max_step_bytes``; ``UnstorableValue`` otherwise."""
        limit = self._execution.max_step_bytes
        try:
            text, size = jsontext.encode(value)
        except ValueError as exc:
            raise UnstorableValue(f"{what} cannot be stored as JSON ({type(value).__name__}): {exc}") from None
        if size > limit:
            raise UnstorableValue(
                f"{what} is {size:,} bytes of JSON, over max_step_bytes ({limit:,}): "
                "store large data elsewhere (a file, a bucket, a table) and pass its key"
            )
        return text

    def _step_failed(self, exc: BaseException, name: str, key: str | None = None) -> BaseException:
        self._step_errors[id(exc)] = (exc, name, key)
        return exc

    def _failed(self, error: BaseException) -> tuple[str, str | None] | None:
        seen: set[int] = set()
        current: BaseException | None = error
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            found = self._step_errors.get(id(current))
            if found is not None and found[0] is current:
                return found[1], found[2]
            current = current.__cause__ or current.__context__
        return None

    def failed_step(self, error: BaseException) -> str | None:
        """The name of the step that raised ``error``, or an error it was raised from or during."""
        found = self._failed(error)
        return None if found is None else found[0]

    def failed_key(self, error: BaseException) -> str | None:
        """The journal key of the work whose journaled failure ``error`` is (or was raised from or
        during): what a retry runs again. None when the code failed between steps, or refused work
        that does not replay the journal (nothing of it was journaled)."""
        found = self._failed(error)
        return None if found is None else found[1]

    @property
    def unfinished(self) -> list[str]:
        """The journal keys of the work running now that has not been journaled yet, sorted: when
        the run fails, the branches of an ``asyncio.gather`` still running beside the failed one."""
        return sorted(self._running)

    async def check_limits(self, key: str) -> None:
        """Before the model call journaled as ``key`` (``ctx.durable.model`` calls this): if making it
        would pass one of the run's limits, park at a ``limit-reached`` interrupt (its answer raises
        them) or raise :class:`~agent_unit.errors.LimitReached`, as the limits' ``on_limit`` says.
        Usage comes from the journal, so the check holds across replays, restarts and continuations."""
        calls = self._model_calls
        self._model_calls += 1
        if self._limits is None:
            return
        asked = 0
        while True:
            where = f"{key}/{asked}"
            if f"interrupt:{LIMIT_REACHED}@{where}" in self._journal:  # raised before: raise them again
                answer = await self.interrupt(LIMIT_REACHED, None, answer=Limits, key=where)
                self._limits = self._limits.raised(answer)
                asked += 1
                continue
            if key in self._journal:
                return  # the call was made: it replays
            passed = first_passed(self._limits, self._usage, calls, self._execution.prices)
            if passed is None:
                return
            if self._limits.on_limit == "fail":
                used = (
                    f"no price for {', '.join(passed['unpriced'])}: give it in [prices]"
                    if passed.get("unpriced")
                    else f"used {passed['used']}"
                )
                raise LimitReached(
                    f"run {self.id} would pass its {passed['limit']} limit ({passed['max']}, {used}) "
                    f"with model call {key}: the call was not made",
                    details=passed,
                )
            await self.interrupt(LIMIT_REACHED, {**passed, "call": key}, answer=Limits, key=where)

    def _check_new(self, key: str, name: str) -> None:
        """Before new work: refuse it if a retried run's journal does not expect it here."""
        mark = self._execution.record.retry
        if mark is not None:
            try:
                check_new_work(
                    mark,
                    replayed=len(self._journal) - self._unreplayed,
                    key=key,
                    name=name,
                    run_id=self.id,
                    agent=self.agent,
                )
            except NonDeterminismError as exc:
                raise self._step_failed(exc, name) from None

    # steps

    def step(
        self,
        name: str,
        fn: Callable[..., Awaitable[T]] | Callable[..., T],
        /,
        *,
        retry: RetryPolicy | None = None,
        usage: Callable[[T], Mapping[str, Any] | None] | None = None,
    ) -> Awaitable[T]:
        """Run ``fn`` once; a replay returns its journaled result (or raises its journaled error).

        ``fn`` is sync or async and takes no argument or a :class:`StepContext`. The result
        makes a JSON round trip and is validated to ``fn``'s return annotation, so it is the
        same value whether the step ran or replayed. ``retry`` tries ``fn`` again when it
        raises (see :class:`RetryPolicy`); without one a step that raises fails at once.
        ``usage(result)`` makes the step a model call of the run's own: it gives the tokens the
        call spent (``{"provider", "model", "input_tokens", "output_tokens"}``), which count in the
        run's usage, and the run's limits are checked before it runs, as a framework's model call's.
        """
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise TypeError(f"run.step(retry=...) takes a RetryPolicy, not {type(retry).__name__}")
        key = self.next_key("step", name)
        if usage is not None:
            return self._model_step(key, name, fn, retry, usage)
        try:
            what, finished = _step_parts[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name, which journaled() refuses
            what, finished = _parts_of(name)
        # The coroutine of _journaled() itself, not one awaiting it: a step is one coroutine fewer.
        return self._journaled(
            key, name, fn, None, return_annotation(fn), what, (), finished, None, None, None, retry, True
        )

    async def _model_step(
        self,
        key: str,
        name: str,
        fn: Callable[..., Any],
        retry: RetryPolicy | None,
        usage: Callable[[Any], Mapping[str, Any] | None],
    ) -> Any:
        """A step that reports the tokens it spent: checked against the run's limits first."""
        await self.check_limits(key)

        def spent(result: Any) -> dict[str, Any] | None:
            found = usage(result)
            if not found:
                return None
            entry = agui_usage([dict(found)])[0]
            wrong = [key for key in COUNTS if key in entry and not (type(entry[key]) is int and entry[key] >= 0)]
            if wrong:
                given = f"{to_snake(wrong[0])} = {entry[wrong[0]]!r}"
                raise TypeError(f"step {name!r}: usage gave {given}: token counts are whole numbers")
            if "totalTokens" not in entry:  # as the framework adapters report it
                entry["totalTokens"] = (entry.get("inputTokens") or 0) + (entry.get("outputTokens") or 0)
            return entry

        return await self.journaled(
            key,
            name,
            fn,
            None,
            return_annotation(fn),
            what=f"the result of step {name!r}",
            started=(step_started(name),),
            finished=functools.partial(step_finished, name),
            retry=retry,
            usage=spent,
        )

    async def journaled(
        self,
        key: str,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...] | None = None,
        annotation: Any = UNTYPED,
        *,
        what: str,
        started: tuple[dict[str, Any], ...] = (),
        finished: Callable[[dict[str, Any] | None], dict[str, Any]] | None = None,
        result_event: Callable[[str], dict[str, Any]] | None = None,
        request_hash: str | None = None,
        usage: Callable[[Any], dict[str, Any] | None] | None = None,
        retry: RetryPolicy | None = None,
    ) -> Any:
        """Run ``fn(*args)`` once under journal ``key``; a replay returns (or raises) what the journal holds.

        The one journaling mechanism: steps, and the model and tool calls of framework
        adapters, all go through here. An adapter whose framework does work that
        ``ctx.durable.model``/``tools``/``value`` do not cover journals it here, under a key from
        :meth:`next_key` or one of its own that is stable across re-runs (a framework's call id).

        ``args=None`` calls ``fn`` as a step does (with a :class:`StepContext` if it takes one).
        ``annotation`` rebuilds the journaled value (:data:`UNTYPED` keeps plain JSON); ``what``
        names the value in errors. ``request_hash`` (a digest of what was asked) must match the
        journaled one on replay, so a changed request is an error, never a stale answer.
        ``started`` events go out as the work starts; ``finished(error)`` is the event that closes
        the work (``error`` is None when it succeeded); ``result_event(text)`` adds one carrying the
        result's JSON; ``usage(result)`` gives the token usage it spent; ``retry`` as ``run.step``'s.

        Whatever ``fn`` returns or raises, the outcome is journaled once: a result that cannot
        be stored fails the work with ``StepResultError``; it is never taken for a store outage,
        which would run ``fn`` again on recovery.
        """
        return await self._journaled(
            key, name, fn, args, annotation, what, started, finished, result_event, request_hash, usage, retry, False
        )

    async def _journaled(
        self,
        key: str,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...] | None,
        annotation: Any,
        what: str,
        started: tuple[dict[str, Any], ...],
        finished: Callable[[dict[str, Any] | None], dict[str, Any]] | None,
        result_event: Callable[[str], dict[str, Any]] | None,
        request_hash: str | None,
        usage: Callable[[Any], dict[str, Any] | None] | None,
        retry: RetryPolicy | None,
        step: bool,
    ) -> Any:
        """:meth:`journaled` with every argument by position: ``run.step`` calls it directly, since
        matching four keywords against twelve parameters is work on every step (measured: 0.5k of
        a no-op step's 59k engine instructions). ``step``: the work is ``run.step``'s, whose
        STEP_STARTED and STEP_FINISHED (when it succeeds) are added as their JSON text
        (:func:`~agent_unit._events.step_text`), not as dicts encoded later (measured: 5k
        instructions a step); ``finished`` still closes a step that fails."""
        entry = self._replayed(key) if self._journal else None  # a fresh run's journal is empty: no call
        if entry is not None:
            journaled = (entry.meta or {}).get("hash")
            if request_hash is not None and journaled is not None and journaled != request_hash:
                raise NonDeterminismError(
                    f"agent {self.agent!r}: {key} was asked something different on replay than when it ran: "
                    "the code between journaled calls must make the same decisions given the same results"
                )
            if entry.error is not None:
                raise self._step_failed(rebuild_error(entry.error), name, key)
            return decode(entry.value or "null", annotation)
        # The common key (ASCII, no NUL) is checked here; storable_name decides the rest.
        if not (key.isascii() and "\x00" not in key) and not jsontext.storable_name(key):
            raise UnstorableValue(
                f"{jsontext.scrub(repr(name))} cannot name a step: a name is journaled as text, "
                "so it must be UTF-8 (no lone surrogates) without NUL characters"
            )
        execution = self._execution
        if execution.record.retry is not None:  # only a retried run's journal can refuse new work
            self._check_new(key, name)
        if execution.deferred is not None:  # a resume's claim, written before any new work runs
            await execution.claim()
        execution.before_step()
        texts = step and type(name) is str  # a name of another type is refused further on
        if texts:
            execution.events.add_text(step_text("STEP_STARTED", name, time_ns() // 1_000_000))
        elif step:
            execution.events.add(step_started(name))
        for event in started:
            execution.events.add(event)
        if started or step:
            execution.schedule_flush(False, STEP_STARTED_WAIT)  # by position: once per step
        else:
            execution.schedule_flush(soon=True)
        context: StepContext | tuple[str, str, str, int]
        if args is None and wants_context(fn):
            context = StepContext(name, key, self.id, self.attempt)
            args = (context,)
        else:
            context = (name, key, self.id, self.attempt)  # a StepContext only if one is asked for
            if args is None:
                args = ()
        meta: dict[str, Any] | None = None if request_hash is None else {"hash": request_hash}
        # This work's span, when OpenTelemetry is on (a replay, above, makes none: nothing ran).
        observed = None if execution.telemetry is None else execution.telemetry.work(key, name)
        attempt = 1
        execution.enter_step(name)
        self._running.add(key)
        try:
            token = _current_step.set(context)
            try:
                while True:
                    try:
                        if type(fn) is FunctionType and fn.__code__.co_flags & CO_COROUTINE:
                            result = await fn(*args)  # an async def's own coroutine: start() inlined
                        else:
                            result = await call(fn, args, threads=STEP_THREADS, abandoned=name, execution=execution)
                        break
                    except Exception as exc:
                        if retry is None or not retry.retries(exc, attempt):
                            await self._fail(exc, key, name, meta, finished)
                            raise
                        delay = retry.delay(attempt)
                        if observed is not None:
                            observed.retry(attempt, exc, delay)
                        execution.events.add(step_retry(name, attempt, error_event(encode_error(exc, name)), delay))
                        execution.schedule_flush(soon=True)
                        if not await execution.backoff(delay):
                            raise Cancelled() from None  # parked or cancelled meanwhile: nothing is journaled
                        attempt += 1
            finally:
                _current_step.reset(token)
            try:
                text, value = encode(result, annotation, what, execution.max_step_bytes)
            except StepResultError as exc:
                raise await self._fail(exc, key, name, meta, finished) from None
            spent = usage(result) if usage is not None else None
            if spent:
                meta = {**(meta or {}), "usage": spent}
            events: tuple[dict[str, Any] | str, ...]
            if texts:
                events = (step_text("STEP_FINISHED", name, time_ns() // 1_000_000),)
            else:
                events = () if finished is None else (finished(None),)
            if result_event is not None:
                events = (*events, result_event(text))
            try:
                await execution.commit(JournalEntry(key, text, None, meta), *events)
            except AgentUnitError as exc:
                if isinstance(exc, RunConflict):
                    raise
                # The store refused this entry for good (DynamoDB's item size): journal the failure instead.
                failure = StepResultError(f"{what} cannot be stored: {exc}")
                raise await self._fail(failure, key, name, meta, finished) from None
            if spent:
                self._usage.append(spent)
            if observed is not None:
                observed.returned(text, spent)
        except BaseException as exc:
            if observed is not None:
                observed.end(exc, attempt)
            raise
        finally:
            execution.leave_step(name)
            self._running.discard(key)
        if observed is not None:
            observed.end(None, attempt)
        return value

    async def _fail(
        self,
        exc: BaseException,
        key: str,
        name: str,
        meta: dict[str, Any] | None,
        finished: Callable[[dict[str, Any] | None], dict[str, Any]] | None,
    ) -> BaseException:
        """Journal ``exc`` as the outcome of ``key``, with the event that closes the work as failed.

        A method, not a closure in :meth:`journaled`: a closure makes its variables cells and a
        function object on every step, though a step rarely fails."""
        error = encode_error(exc, name)
        events = () if finished is None else (finished(error_event(error)),)
        await self._execution.commit(JournalEntry(key, error=error, meta=meta), *events)
        return self._step_failed(exc, name, key)

    def idempotency_key(self) -> str:
        """The key of the step (or tool call) running now."""
        key = self.current_key()
        if key is None:
            raise RuntimeError("run.idempotency_key() was called outside a step: call it inside run.step(...)")
        return idempotency_key(self.id, key)

    def current_key(self) -> str | None:
        """The journal key of the step or tool call running now, or of the framework's unit of work;
        ``None`` between them. Work that ran under a key is journaled, so code that must only run
        inside journaled work (a side effect) checks it, as ``assert_adapter`` does."""
        context = _current_step.get()
        if isinstance(context, tuple):
            if context[2] == self.id:
                return context[1]
        elif context is not None and context.run_id == self.id:
            return context.key
        return self._work_key() if self._work_key is not None else None

    # pauses

    @overload
    async def interrupt(
        self,
        name: str,
        payload: Any = None,
        *,
        key: str | None = None,
        schema: dict[str, Any] | None = None,
        events: Sequence[dict[str, Any]] = (),
        timeout: Duration | None = None,  # noqa: ASYNC109 - a durable deadline, not an asyncio timeout
        default: Any = ...,
    ) -> Any: ...

    @overload
    async def interrupt(
        self,
        name: str,
        payload: Any = None,
        *,
        answer: type[T],
        key: str | None = None,
        events: Sequence[dict[str, Any]] = (),
        timeout: Duration | None = None,  # noqa: ASYNC109 - a durable deadline, not an asyncio timeout
        default: T = ...,
    ) -> T: ...

    @overload  # a union (``bool | Approval``) or another type form that is not a class
    async def interrupt(
        self,
        name: str,
        payload: Any = None,
        *,
        answer: object,
        key: str | None = None,
        events: Sequence[dict[str, Any]] = (),
        timeout: Duration | None = None,  # noqa: ASYNC109 - a durable deadline, not an asyncio timeout
        default: Any = ...,
    ) -> Any: ...

    async def interrupt(
        self,
        name: str,
        payload: Any = None,
        *,
        answer: Any = UNTYPED,
        key: str | None = None,
        schema: dict[str, Any] | None = None,
        events: Sequence[dict[str, Any]] = (),
        timeout: Duration | None = None,  # noqa: ASYNC109 - a durable deadline, not an asyncio timeout
        default: Any = ...,
    ) -> Any:
        """Park until ``POST /runs/{id}/resume`` answers; return the answer validated as ``answer``.

        The interrupt stores ``answer``'s JSON Schema, so a UI can render a form and a wrong
        answer is refused while the run stays parked. ``key`` (a tool call's id, a framework's
        interrupt id) names the interrupt for good instead of by its occurrence, for interrupts
        that a replay may reach in another order. ``schema`` is the JSON Schema of an untyped
        answer, for a framework whose own interrupt carries one (given ``answer``, its schema is used).
        ``events`` (AG-UI events, such as the ``TOOL_CALL_*`` of the call an approval is for) are
        stored just before ``RUN_INTERRUPTED`` when the run parks here; a replay emits none.

        ``timeout`` (``"2d"``, seconds or a ``timedelta``) is a deadline: if nobody answers by then,
        the run wakes (as from a sleep) and this returns ``default``, or raises
        :class:`~agent_unit.errors.InterruptExpired` (catch it to take another branch) when no
        ``default`` is given. The expiry is journaled, so every replay takes the same branch, and
        an answer that comes later is refused (409).
        """
        journal_key = f"interrupt:{name}@{key}" if key is not None else self.next_key("interrupt", name)
        seconds = None if timeout is None else parse_duration(timeout).total_seconds()
        return await self._interrupt(journal_key, name, payload, answer, schema, events, seconds, default)

    async def _interrupt(
        self,
        key: str,
        name: str,
        payload: Any,
        answer: Any = UNTYPED,
        schema: dict[str, Any] | None = None,
        events: Sequence[dict[str, Any]] = (),
        timeout: float | None = None,  # noqa: ASYNC109 - a durable deadline, not an asyncio timeout
        default: Any = ...,
    ) -> Any:
        """The interrupt under journal ``key``; ``schema`` describes an untyped answer (a framework's own);
        ``timeout``: seconds until it expires with ``default`` (``...``: none, InterruptExpired)."""
        entry = self._replayed(key)
        if entry is not None:
            expired = expired_at(entry)
            if expired is not None:
                if default is not ...:
                    return default
                raise InterruptExpired(
                    f"nobody answered {name!r} by its deadline ({expired}): pass default= to "
                    "run.interrupt(...) to go on with a default answer instead",
                    details={"interrupt": name, "key": key, "expired_at": expired},
                )
            try:
                return decode(entry.value or "null", answer)
            except ValidationError as exc:
                raise NonDeterminismError(
                    f"the answer journaled for interrupt {name!r} no longer fits {answer!r}: {exc}"
                ) from None
        if not jsontext.storable_name(key):
            raise UnstorableValue(
                f"{jsontext.scrub(repr(key))} cannot name an interrupt: a name is journaled as text, "
                "so it must be UTF-8 (no lone surrogates) without NUL characters"
            )
        self._check_new(key, name)
        _, payload = encode(payload, UNTYPED, f"the payload of interrupt {name!r}", self._execution.max_step_bytes)
        if answer is not UNTYPED:
            schema = answer_schema(answer)
        # Whole microseconds, rounded down: the record's date holds exactly the due time the sweep compares.
        expires_at = None if timeout is None else floor_datetime(self._execution.now() + timeout)
        interrupt = Interrupt(
            name=name,
            key=key,
            payload=payload,
            answer_schema=schema,
            answer_type=type_ref(answer),
            expires_at=expires_at,
        )
        for event in events:  # stored with the park, before RUN_INTERRUPTED
            self._execution.events.add(dict(event))
        raise Interrupted(interrupt)

    def end_replay(self) -> None:
        """Only new work runs from here (:attr:`replaying` turns False, so :meth:`emit` emits).

        For an adapter whose framework checkpoints its own work (LangGraph): the journal may hold
        answers the framework has moved past and will never read again, which would otherwise keep
        the run replaying. Call it once the framework resumes from its own checkpoint.
        """
        self._unreplayed = 0

    def set_work_key(self, current: Callable[[], str | None]) -> None:
        """For a framework that checkpoints its own work (LangGraph's nodes): name the unit running now.

        ``current()`` returns a key that is stable across re-runs of that unit (``None`` outside
        one). Keys of the work inside it count within it (:meth:`next_key`), and
        :meth:`idempotency_key` inside it derives from it.
        """
        self._work_key = current

    async def sleep(self, duration: Duration) -> None:
        """Park until ``duration`` (``"10m"``, ``"2d"``, seconds or a ``timedelta``) has passed."""
        delta = parse_duration(duration)
        await self._sleep_until(lambda now: now + delta.total_seconds())

    async def sleep_until(self, moment: datetime) -> None:
        """Park until ``moment`` (an aware ``datetime``)."""
        epoch = to_epoch(moment)
        await self._sleep_until(lambda now: epoch)

    async def _sleep_until(self, wake_at: Callable[[float], float]) -> None:
        key = self.next_key("sleep", "")
        entry = self._replayed(key)
        now = self._execution.now()
        if entry is None:
            self._check_new(key, "sleep")
            due = wake_at(now)
            if due <= now:
                return
            try:
                to_datetime(due)  # the run record holds the wake time as a date: check it has one
            except (OverflowError, ValueError, OSError):
                raise ValueError(f"cannot sleep until {due:.0f} s after 1970: that is past the year 9999") from None
            raise Sleeping(due, JournalEntry(key, dumps(due)))
        due = json.loads(entry.value or "0")
        if due > now:
            raise Sleeping(due, None)

    # messages

    async def messages(self) -> list[Any]:
        """The messages sent to this run since the last call (``RunEngine.send``, an A2A message to a
        working task), oldest first: each one's JSON value. Journaled, so a replay reads the same;
        a message sent after the run's last read stays in its events (and its A2A history) only.
        """

        async def read() -> dict[str, Any]:
            found: list[Any] = []
            last = self._messages_after
            for stored in await self._execution.store.read_events(self.id, after=self._messages_after):
                last = stored.seq
                event = json.loads(stored.data)
                if event.get("type") == "CUSTOM" and event.get("name") == MESSAGE:
                    found.append((event.get("value") or {}).get("value"))
            return {"after": last, "messages": found}

        result = await self.journaled(self.next_key("messages", ""), "messages", read, (), what="the messages read")
        self._messages_after = max(self._messages_after, int(result["after"]))
        return list(result["messages"])

    # events

    def stream(self, event: dict[str, Any]) -> None:
        """Add an AG-UI event (text, reasoning, tool, state) from live work; deltas are batched.

        For adapters, which translate a framework's own stream (``ctx.stream`` calls this).
        Call it from inside a journaled call: a replay runs nothing, so it emits nothing, as the
        event stream's contract requires.
        """
        execution = self._execution
        execution.events.add(dict(event))
        execution.schedule_flush(soon=event.get("type") not in _DELTAS)

    async def emit(self, name: str, value: Any = None) -> None:
        """Emit a CUSTOM event (not while replaying: only new work reaches the stream).

        ``value`` is JSON data of at most ``max_step_bytes``; ``UnstorableValue`` otherwise.
        """
        if not self.replaying:
            text = self._storable(value, f"the value of event {name!r}")
            self._execution.events.add(custom(name, json.loads(text)))
            self._execution.schedule_flush(soon=True)
