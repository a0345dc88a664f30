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
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_THREADS", "run_in_thread"]

MAX_THREADS = 32
"""Sync steps running at once in one process; more wait for a thread."""

_Loop = asyncio.AbstractEventLoop
_Call = tuple[contextvars.Context, Callable[..., Any], tuple[Any, ...], _Loop, "asyncio.Future[Any]"]

_calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
_lock = threading.Lock()
_threads = 0
_idle = 0  # threads waiting for a call
_waiting = 0  # calls queued with no thread to take them (all MAX_THREADS busy)
_pid = os.getpid()


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
        context, fn, args, loop, future = _calls.get()
        result: Any = None
        error: BaseException | None = None
        try:
            result = context.run(fn, *args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting step, whatever it is
            error = exc
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits the result any more
            loop.call_soon_threadsafe(_deliver, future, result, error)
        # Drop every reference before waiting for the next call: an idle thread must not keep a
        # finished run (its context, result or error) alive.
        del context, fn, args, loop, future, result, error
        with _lock:
            if _waiting:
                _waiting -= 1  # this thread takes a call that waits in the queue
            else:
                _idle += 1


def _reserve() -> None:
    """Take an idle thread for one call, or start one (up to MAX_THREADS; beyond, the call waits)."""
    global _threads, _idle, _waiting, _pid
    with _lock:
        if _pid != os.getpid():  # a forked child has none of its parent's threads
            _pid, _threads, _idle, _waiting = os.getpid(), 0, 0, 0
            while not _calls.empty():
                _calls.get_nowait()
        if _idle:
            _idle -= 1
            return
        if _threads >= MAX_THREADS:
            _waiting += 1
            return
        _threads += 1
        name = f"agent-unit-step-{_threads}"
    threading.Thread(target=_work, name=name, daemon=True).start()


def run_in_thread(fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """``fn(*args)`` in a worker thread, in a copy of the caller's context; await the result."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    _reserve()
    _calls.put((contextvars.copy_context(), fn, args, loop, future))
    return future
