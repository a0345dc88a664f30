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

A function that returned within microseconds last time goes to one thread kept for such calls
(to the pool, not waited for, while another loop's call holds that thread), and the loop waits for
it on the spot, at most :data:`QUICK_WAIT`: its result skips the loop's wake-up socket and a turn
of the loop. Blocking work is never waited for this way, and a function
that once outlasted the wait is not waited for again until it has returned quickly
:data:`QUICK_AGAIN` times in a row (through the pool). Two things make that hop cheap:

- On Linux the quick thread runs on the loop's own core (its affinity follows the core the loop
  is on). The loop waits while the call runs, so nothing that could have used another core runs
  beside it; a thread on another core would be woken there and would wake the loop's core in turn,
  and a virtual machine whose idle cores halt pays each wake-up as an interrupt between its
  virtual CPUs: about 30 µs, more than a whole async step.
- The call and its result are signalled through a socket pair, whose send and receive release the
  GIL before they wake the other side: the woken thread finds the GIL free instead of waking,
  finding it held and sleeping again (a queue's put and a lock's release wake while holding it).

A call that outlasts the wait unpins the quick thread, so a function turned slow does not stay on the
loop's core; threads a pinned call starts are unpinned once it returns. (A process it starts keeps
the pin; starting one takes milliseconds, so a quick function starts one only on a rare path.)
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from types import CodeType, FunctionType
from typing import Any

__all__ = ["MAX_THREADS", "QUICK_AGAIN", "QUICK_RUN", "QUICK_WAIT", "run_in_thread"]

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
stalls the loop this long once, then is not waited for again until :data:`QUICK_AGAIN` quick returns
in a row: so the loop loses at most one wait per that many calls of a step function, while a quick
one saves a thread wake-up on every call. The loop stalls this long already whenever a worker thread
computing in Python holds the GIL."""

QUICK_RUN = 0.00005
"""Seconds within which a call must have returned for the next call of its function to be waited for.
Functions are told apart by their code: every closure made by one ``lambda`` shares its record."""

QUICK_AGAIN = 1000
"""Quick returns in a row (through the pool) after which a function that outlasted a wait on the spot is
waited for again. It may have been late for the machine's sake (the GIL held by a computing thread, a busy
core), not its own; if it is slow now and then, it stalls the loop one :data:`QUICK_WAIT` per this many
calls at most (5 µs a call), where the hop it saves is about 30 µs a call."""

_MAX_QUICK = 10_000  # functions remembered as quick; past this all are forgotten
_GO = b"\0"  # one byte each way per quick call; the loop's end closing stops the thread


class _Call:
    """One call handed to a worker; ``waited`` and ``outcome`` change only under ``_lock``."""

    __slots__ = ("args", "context", "fn", "future", "loop", "outcome", "waited")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], loop: asyncio.AbstractEventLoop) -> None:
        self.context = contextvars.copy_context()
        self.fn = fn
        self.args = args
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.waited = False  # the loop waits on the spot: it takes the outcome itself
        self.outcome: tuple[Any, BaseException | None] | None = None


_calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
_lock = threading.Lock()
_threads = 0
_idle = 0  # threads waiting for a call
_waiting = 0  # calls queued with no thread to take them (all MAX_THREADS busy)
_quick: set[CodeType] = set()  # functions whose last call returned within QUICK_RUN
# Functions that outlasted a wait on the spot, each with its quick returns in a row since: not waited for
# again until QUICK_AGAIN (a machine that stalled the thread once does not cost a quick function its hop for good).
_late: dict[CodeType, int] = {}


class _QuickThread:
    """The thread kept for quick calls: one call at a time, handed over and answered through a socket pair."""

    def __init__(self) -> None:
        self.ours, theirs = socket.socketpair()
        if sys.platform.startswith("linux") and struct.calcsize("ll") == 16:  # a 64-bit struct timeval
            # The kernel's own receive timeout: one system call a wait (a socket timeout polls first).
            self.ours.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, int(QUICK_WAIT * 1e6)))
        else:
            self.ours.settimeout(QUICK_WAIT)
        self.call: _Call | None = None  # the call handed over, set before the byte that announces it
        self.busy = False
        self.core = -1  # the core it is pinned to; -1: any
        thread = threading.Thread(target=self._serve, args=(theirs,), name="agent-unit-step-quick", daemon=True)
        thread.start()
        self.native_id = thread.native_id  # the kernel's id of the thread, set once it has started

    def _serve(self, theirs: socket.socket) -> None:
        anywhere = os.sched_getaffinity(0) if _follow else set()  # before any pin
        while theirs.recv(1) == _GO:
            call, self.call = self.call, None
            assert call is not None
            pinned, threads = self.core, threading.active_count()
            result, error = _run(call)
            if pinned != -1 and threading.active_count() > threads:
                _free_threads_pinned_to(pinned, anywhere)
            if _quick_thread is not self:  # a forked child's copy of this thread: the socket is the parent's
                return
            with _lock:
                waited = call.waited
                if waited:  # the loop waits on the spot: it takes the outcome, then frees this thread
                    call.outcome = (result, error)
                else:
                    self.busy = False
            if waited:
                del call, result, error  # an idle thread keeps nothing of the call it ran alive
                theirs.send(_GO)  # releases the GIL before it wakes the loop
            else:
                loop, future = call.loop, call.future
                del call  # before the hand-back (see _hand_back)
                _hand_back(loop, future, result, error)
                del loop, future, result, error

    def pin(self) -> None:
        """Run on the core the caller runs on (Linux): the loop waits while this thread works."""
        global _follow, _current_core
        if not _follow or self.native_id is None:
            return
        try:
            if _current_core is None:
                import ctypes  # only in a process whose sync steps turned out quick

                getcpu = ctypes.CDLL(None).sched_getcpu
                getcpu.restype, getcpu.argtypes = ctypes.c_int, []
                _current_core = getcpu
            core = _current_core()
            if core != self.core:
                if core < 0:
                    raise OSError("sched_getcpu failed")
                os.sched_setaffinity(self.native_id, {core})
                self.core = core
        except (OSError, AttributeError, ImportError):  # no ctypes or sched_getcpu, or a sandbox that refuses
            _follow = False
            self.unpin()

    def unpin(self) -> None:
        """Run on any core the caller may run on again."""
        if self.core != -1 and self.native_id is not None:
            self.core = -1
            with contextlib.suppress(OSError):
                os.sched_setaffinity(self.native_id, os.sched_getaffinity(0))


def _free_threads_pinned_to(core: int, anywhere: set[int]) -> None:
    """Let the threads a quick call started run anywhere: a thread inherits the affinity of the one
    that starts it, here the quick thread's pin to the loop's core (a pool that grew in the call,
    a library's background thread). Called only when the call left more threads than it found."""
    for thread in threading.enumerate():
        native_id = thread.native_id
        if native_id is None or native_id == threading.get_native_id():
            continue
        with contextlib.suppress(OSError):  # it may have ended meanwhile
            if os.sched_getaffinity(native_id) == {core}:
                os.sched_setaffinity(native_id, anywhere)


_quick_thread: _QuickThread | None = None
_no_quick_thread = False  # set where a socket pair cannot be made
_follow = sys.platform.startswith("linux") and hasattr(os, "sched_setaffinity")
_current_core: Callable[[], int] | None = None  # sched_getcpu(3), loaded on first use


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


def _run(call: _Call) -> tuple[Any, BaseException | None]:
    """Run the call in its context; remember whether its function returned within QUICK_RUN."""
    result: Any = None
    error: BaseException | None = None
    started = time.perf_counter()
    try:
        result = call.context.run(call.fn, *call.args)
    except BaseException as exc:  # noqa: BLE001 - handed to the awaiting step, whatever it is
        # Without this frame in its traceback (the step's own frames stay): the frame holds the
        # error, a cycle that would keep the call and its run alive until the garbage collector ran.
        error = exc.with_traceback(exc.__traceback__.tb_next if exc.__traceback__ is not None else None)
    code = _code(call.fn)
    if code is not None:
        if time.perf_counter() - started < QUICK_RUN:
            if len(_quick) >= _MAX_QUICK:
                _quick.clear()
            _quick.add(code)
            late = _late.get(code)
            if late is not None:  # counted without a lock: two threads racing only lose a count
                if late + 1 >= QUICK_AGAIN:
                    _late.pop(code, None)
                else:
                    _late[code] = late + 1
        else:
            _quick.discard(code)
            if code in _late:
                _late[code] = 0
    return result, error


def _hand_back(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], result: Any, error: BaseException | None
) -> None:
    """Deliver the outcome through the loop. The caller holds no ``_Call`` by then: once the loop has the
    outcome the run goes on, and may end before this thread runs again; the call's context (the run)
    must not stay alive in an idle thread meanwhile."""
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits the result any more
        loop.call_soon_threadsafe(_deliver, future, result, error)


def _work() -> None:
    global _idle, _waiting
    while True:
        call = _calls.get()
        result, error = _run(call)
        loop, future = call.loop, call.future
        del call  # before the hand-back (see _hand_back)
        with _lock:
            if _waiting:
                _waiting -= 1  # this thread takes a call that waits in the queue
            else:
                _idle += 1
        _hand_back(loop, future, result, error)
        # Drop every reference before waiting for the next call: an idle thread must not keep a
        # finished run (its result or error) alive.
        del loop, future, result, error


def _forget_threads_after_fork() -> None:
    """In a forked child, which has none of its parent's threads, nor a lock one of them held."""
    global _lock, _threads, _idle, _waiting, _quick_thread
    if _quick_thread is not None:
        _quick_thread.ours.close()  # the child's copy; the parent's thread is not here
    _lock, _threads, _idle, _waiting, _quick_thread = threading.Lock(), 0, 0, 0, None
    while not _calls.empty():
        _calls.get_nowait()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_threads_after_fork)


def _reserve() -> None:
    """Take an idle thread for one call, or start one (up to MAX_THREADS; beyond, the call waits)."""
    global _threads, _idle, _waiting
    with _lock:
        if _idle:
            _idle -= 1
            return
        if _threads >= MAX_THREADS:
            _waiting += 1
            return
        _threads += 1
        name = f"agent-unit-step-{_threads}"
    threading.Thread(target=_work, name=name, daemon=True).start()


def _reserve_quick_thread() -> _QuickThread | None:
    """The thread kept for quick calls, started on first use; None while it runs another call."""
    global _quick_thread, _no_quick_thread
    with _lock:
        if _quick_thread is not None:
            if _quick_thread.busy:
                return None
            _quick_thread.busy = True
            return _quick_thread
    if _no_quick_thread:
        return None
    try:
        started = _QuickThread()
    except OSError:  # no socket pair here (a sandbox): quick calls go to the pool like any other
        _no_quick_thread = True
        return None
    with _lock:
        if _quick_thread is None:
            _quick_thread = started
            started.busy = True
            return started
    started.ours.close()  # another loop's thread started one meanwhile: this one's thread sees the end and stops
    return None


def run_in_thread(fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """``fn(*args)`` in a worker thread, in a copy of the caller's context; await the result.

    A function that returned quickly last time is handed to the thread kept for quick calls and
    waited for on the spot, at most :data:`QUICK_WAIT`: the future comes back done and awaiting it
    takes no turn of the loop.
    """
    call = _Call(fn, args, asyncio.get_running_loop())
    code = _code(fn)
    quick = None if code is None or code not in _quick or code in _late else _reserve_quick_thread()
    if quick is None:
        _reserve()
        _calls.put(call)
        return call.future
    try:
        quick.pin()
    except BaseException:  # a signal's exception (KeyboardInterrupt) before the hand-over: nothing was sent
        quick.busy = False
        raise
    call.waited = True
    quick.call = call
    try:
        # Releases the GIL before it wakes the thread. Nothing but OSError is caught here: a signal's
        # exception may come as the call returns, after the byte was sent; the thread then stays busy
        # (quick calls go to the pool), never handed a second call while it runs the first.
        quick.ours.send(_GO)
    except OSError:  # cannot happen short of a closed socket: the call goes to the pool, as any call
        quick.call, quick.busy, call.waited = None, False, False
        _reserve()
        _calls.put(call)
        return call.future
    try:
        quick.ours.recv(1)
    except BaseException as stopped:  # the wait ran out (or a signal's exception: it goes on up)
        with _lock:
            running = call.outcome is None
            if running:  # the result comes through the loop; the thread frees itself
                call.waited = False
                # A function turned slow never shares the loop's core. Unpinned under the lock: the
                # thread cannot be freed meanwhile, so another loop's pin() never interleaves with this.
                quick.unpin()
        if running:
            if not isinstance(stopped, (TimeoutError, BlockingIOError)):
                raise
            if len(_late) >= _MAX_QUICK:
                _late.clear()
            _late[code] = 0  # type: ignore[index]  # not None: only plain functions are quick
            return call.future
        _take_answer(quick.ours)  # it finished as the wait ended: its byte is on its way
        if not isinstance(stopped, (TimeoutError, BlockingIOError)):
            quick.busy = False
            raise
    quick.busy = False
    assert call.outcome is not None
    _deliver(call.future, *call.outcome)
    return call.future


def _take_answer(ours: socket.socket) -> None:
    while True:
        with contextlib.suppress(TimeoutError, BlockingIOError):
            ours.recv(1)
            return
