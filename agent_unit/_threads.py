"""The worker threads sync step functions run in, with the shortest hop to and from the loop.

A sync step (``run.step("charge", lambda: client.charge(...))``, the common way to call a
blocking client) runs in a worker thread, as FastAPI runs ``def`` endpoints, so blocking work
never stalls the event loop, the lease renewals or other runs. ``loop.run_in_executor`` with a
``ThreadPoolExecutor`` costs a no-op about 70 µs there and back here (a work item, the
executor's locks, a concurrent future chained to an asyncio one); this pool hands the call to
an idle thread through one queue and the result back with one ``call_soon_threadsafe``: about
30 µs. Threads start on demand up to :data:`MAX_THREADS` (a slow step never waits for another
one to finish below that), stay for the next step, and are daemons: a process that exits with
a step still running has not journaled it, so the step runs again on recovery, as after a crash.

A function that returned within microseconds last time is waited for on the spot, at most
:data:`QUICK_WAIT`, with the GIL released: its result skips the loop's wake-up socket and a turn
of the loop. Blocking work is never waited for this way, and a function that once outlasted the
wait is never waited for again.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
import time
from collections.abc import Callable
from types import CodeType, FunctionType
from typing import Any

__all__ = ["MAX_THREADS", "QUICK_RUN", "QUICK_WAIT", "run_in_thread"]

MAX_THREADS = 32
"""Sync steps running at once in one process; more wait for a thread."""

QUICK_WAIT = 0.005
"""Seconds the loop waits on the spot, at most, for a function whose last call returned within :data:`QUICK_RUN`.

Handing a result back through the loop (a write to its wake-up socket, a turn of the loop, the
GIL passed back and forth) costs a no-op sync step more than the wait does. The wait is as long as
a 250 Hz kernel tick and the GIL's own switch interval on purpose: a timed wait that ends before the
CPU's next tick arms a timer of its own, and in a virtual machine reprogramming the timer traps to
the hypervisor (measured: a 0.2 ms wait cost a no-op sync step 12 to 25 µs more than a 5 ms one, on
a host whose idle CPUs poll). A function that returns late (a cache miss that goes to the network)
stalls the loop this long once, then is never waited for again: so the loop loses at most one wait
per step function, while a quick one saves a thread wake-up on every call. The loop stalls this
long already whenever a worker thread computing in Python holds the GIL."""

QUICK_RUN = 0.00005
"""Seconds within which a call must have returned for the next call of its function to be waited for.
Functions are told apart by their code: every closure made by one ``lambda`` shares its record."""

_MAX_QUICK = 10_000  # functions remembered as quick; past this all are forgotten


class _Call:
    """One call handed to a worker; ``waiter`` and ``outcome`` change only under ``_lock``."""

    __slots__ = ("args", "context", "fn", "future", "loop", "outcome", "waiter")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], loop: asyncio.AbstractEventLoop) -> None:
        self.context = contextvars.copy_context()
        self.fn = fn
        self.args = args
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.waiter: threading.Lock | None = None  # held while the loop waits on the spot
        self.outcome: tuple[Any, BaseException | None] | None = None


_calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
_lock = threading.Lock()
_threads = 0
_idle = 0  # threads waiting for a call
_waiting = 0  # calls queued with no thread to take them (all MAX_THREADS busy)
_pid = os.getpid()
_quick: set[CodeType] = set()  # functions whose last call returned within QUICK_RUN
_late: set[CodeType] = set()  # functions that once outlasted a wait on the spot: never waited for again


def _code(fn: Callable[..., Any]) -> CodeType | None:
    """The code of a plain function (a ``def`` or ``lambda``): what the quick record is kept by."""
    return fn.__code__ if type(fn) is FunctionType else None


def _deliver(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(result)
    elif isinstance(error, StopIteration):  # a future cannot hold one (it would end a coroutine)
        future.set_exception(RuntimeError(f"the step function raised StopIteration: {error}"))
    else:
        future.set_exception(error)


def _work() -> None:
    global _idle, _waiting
    while True:
        call = _calls.get()
        result: Any = None
        error: BaseException | None = None
        started = time.perf_counter()
        try:
            result = call.context.run(call.fn, *call.args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting step, whatever it is
            error = exc
        code = _code(call.fn)
        if code is not None:
            if time.perf_counter() - started < QUICK_RUN:
                if len(_quick) >= _MAX_QUICK:
                    _quick.clear()
                _quick.add(code)
            else:
                _quick.discard(code)
            del code
        with _lock:
            if _waiting:
                _waiting -= 1  # this thread takes a call that waits in the queue
            else:
                _idle += 1
            waiter = call.waiter
            if waiter is not None:  # the loop waits on the spot: it takes the outcome itself
                call.outcome = (result, error)
        if waiter is None:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits the result any more
                call.loop.call_soon_threadsafe(_deliver, call.future, result, error)
        # Drop every reference before waiting for the next call: an idle thread must not keep a
        # finished run (its context, result or error) alive. The waiter goes last, so the loop it
        # wakes finds this thread about to wait, not holding the GIL.
        del call, result, error
        if waiter is not None:
            waiter.release()
            del waiter


def _reserve() -> bool:
    """Take an idle thread for one call (True), or start one (up to MAX_THREADS; beyond, the call waits)."""
    global _threads, _idle, _waiting, _pid
    with _lock:
        if _pid != os.getpid():  # a forked child has none of its parent's threads
            _pid, _threads, _idle, _waiting = os.getpid(), 0, 0, 0
            while not _calls.empty():
                _calls.get_nowait()
        if _idle:
            _idle -= 1
            return True
        if _threads >= MAX_THREADS:
            _waiting += 1
            return False
        _threads += 1
        name = f"agent-unit-step-{_threads}"
    threading.Thread(target=_work, name=name, daemon=True).start()
    return False


def run_in_thread(fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """``fn(*args)`` in a worker thread, in a copy of the caller's context; await the result.

    A function that returned quickly last time, given to an idle thread, is waited for on the spot
    (at most :data:`QUICK_WAIT`): the future comes back done and awaiting it takes no turn of the loop.
    """
    call = _Call(fn, args, asyncio.get_running_loop())
    future = call.future
    code = _code(fn)
    quick = _reserve() and code is not None and code in _quick and code not in _late
    if quick:
        waiter = call.waiter = threading.Lock()
        waiter.acquire()
    _calls.put(call)
    if quick and not waiter.acquire(timeout=QUICK_WAIT):
        with _lock:
            if call.outcome is None:  # still running: the result comes through the loop
                call.waiter = None
                if code is not None:  # always, when waited for: only plain functions are
                    if len(_late) >= _MAX_QUICK:
                        _late.clear()
                    _late.add(code)
                return future
    if call.outcome is not None:
        _deliver(future, *call.outcome)
    return future
