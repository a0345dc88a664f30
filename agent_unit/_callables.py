"""What a step function is, read off the function itself: its return type, its arity, sync or async.

Each step calls these, and lambdas are made anew per call, so the answers are cached per code
object; kept apart from :mod:`agent_unit.run` because they are about Python callables, not runs.
"""

from __future__ import annotations

import asyncio
import inspect
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._codec import UNTYPED
from ._threads import run_in_thread

if TYPE_CHECKING:
    from ._execution import Execution

__all__ = ["call", "is_async", "return_annotation", "wants_context"]


_arity: dict[Any, bool] = {}
_returns: dict[Any, Any] = {}


# The last function each of return_annotation and wants_context was asked about, with its answer:
# a loop's steps repeat one function, and an identity check is cheaper than the code-keyed lookup
# (a code object's hash is computed on every lookup, over its constants: measured 1.5k of the
# 158k instructions of a no-op step for the two). One reference each is held; a pair is replaced
# whole, so a thread never reads one function's answer for another.
_last_returns: tuple[Any, Any] = (None, UNTYPED)
_last_arity: tuple[Any, bool] = (None, False)


def return_annotation(fn: Callable[..., Any]) -> Any:
    """``fn``'s return annotation; a string one is evaluated once per code object (an eval is slow)."""
    global _last_returns
    last, hint = _last_returns
    if last is fn:
        return hint
    hint = _return_annotation(fn)
    _last_returns = (fn, hint)
    return hint


def _return_annotation(fn: Callable[..., Any]) -> Any:
    annotations = getattr(fn, "__annotations__", None)
    if not annotations or "return" not in annotations:
        return UNTYPED
    hint = annotations["return"]
    if not isinstance(hint, str):
        return hint
    code = getattr(fn, "__code__", None)
    if code is not None and code in _returns:
        return _returns[code]
    try:
        hint = inspect.get_annotations(fn, eval_str=True).get("return", UNTYPED)
    except NameError:  # names a class local to a function: no type to validate against
        hint = UNTYPED
    if code is not None:
        _returns[code] = hint
    return hint


def wants_context(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` takes the StepContext (cached per code object: lambdas are made per call)."""
    global _last_arity
    last, wants = _last_arity
    if last is fn:
        return wants
    wants = _wants_context(fn)
    _last_arity = (fn, wants)
    return wants


def _wants_context(fn: Callable[..., Any]) -> bool:
    code = getattr(fn, "__code__", None)
    if code is not None and code in _arity:
        return _arity[code]
    params = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if len(params) > 1:
        raise TypeError(f"a step function takes no argument or one StepContext, not {len(params)}")
    if code is not None:
        _arity[code] = bool(params)
    return bool(params)


def is_async(fn: Callable[..., Any]) -> bool:
    """``inspect.iscoroutinefunction``, with the common case (an ``async def``) read off its code flags
    first (measured: 0.3 µs against 0.8 µs, paid once per step)."""
    if type(fn) is types.FunctionType and fn.__code__.co_flags & inspect.CO_COROUTINE:
        return True
    return inspect.iscoroutinefunction(fn)


async def call(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    threads: bool,
    abandoned: str = "",
    execution: Execution | None = None,
) -> Any:
    """``fn(*args)``, awaited if it returns an awaitable; with ``threads``, a sync ``fn`` runs in a worker thread
    (the caller passes ``agent_unit.run.STEP_THREADS``, which a host without threads turns off).

    A thread cannot be stopped: if the await is cancelled (the run was cancelled) while ``fn``
    still runs, ``execution`` is told (:meth:`~agent_unit._execution.Execution.abandon`, as step
    ``abandoned``), so a cancel can say the step is still settling until the thread is done."""
    if threads and not is_async(fn):
        # As FastAPI does for `def` endpoints: blocking work runs in a worker thread,
        # so the loop keeps renewing this run's lease and serving other runs.
        thread = run_in_thread(fn, *args)
        if thread.done() or execution is None:
            result = await thread
        else:
            try:
                result = await asyncio.shield(thread)
            except asyncio.CancelledError:
                if not thread.done():
                    execution.abandon(abandoned, thread)
                raise
    else:
        result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result
