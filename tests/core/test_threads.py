"""Sync step functions run in worker threads: results, errors and context come back exactly."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import os
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from typing import TypeVar

import pytest

from agent_unit import _threads as threads

name: contextvars.ContextVar[str] = contextvars.ContextVar("name", default="none")
T = TypeVar("T")


async def test_a_call_returns_its_result_in_another_thread_with_the_callers_context() -> None:
    name.set("caller")
    here = threading.get_ident()
    result = await threads.run_in_thread(lambda: (name.get(), threading.get_ident()))
    assert result[0] == "caller" and result[1] != here


async def test_an_error_is_raised_to_the_awaiting_code_as_it_was_raised() -> None:
    def fails() -> None:
        raise KeyError("nope")

    with pytest.raises(KeyError, match="nope"):
        await threads.run_in_thread(fails)

    def stops() -> None:
        raise StopIteration("done")

    with pytest.raises(RuntimeError, match="StopIteration"):  # a future cannot hold StopIteration
        await threads.run_in_thread(stops)


async def test_slow_calls_never_wait_for_each_other_below_the_limit() -> None:
    release = threading.Event()
    started: list[int] = []

    def slow(i: int) -> int:
        started.append(i)
        release.wait(10)
        return i

    calls = [threads.run_in_thread(slow, i) for i in range(8)]
    for _ in range(200):
        if len(started) == 8:
            break
        await asyncio.sleep(0.01)
    assert sorted(started) == list(range(8))  # all eight run at once
    release.set()
    assert await asyncio.gather(*calls) == list(range(8))


async def test_calls_beyond_the_limit_wait_for_a_thread_and_all_finish(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "MAX_THREADS", 2)
    release = threading.Event()

    def slow(i: int) -> int:
        release.wait(10)
        return i

    calls = [threads.run_in_thread(slow, i) for i in range(6)]
    await asyncio.sleep(0.05)
    release.set()
    assert await asyncio.gather(*calls) == list(range(6))
    # Afterwards every call still gets a thread at once.
    assert await asyncio.wait_for(asyncio.gather(*(threads.run_in_thread(int, i) for i in range(6))), 5) == list(
        range(6)
    )


async def test_an_idle_thread_keeps_nothing_of_the_call_it_ran_alive() -> None:
    class Payload:
        pass

    payload = Payload()
    ref = weakref.ref(payload)
    assert await threads.run_in_thread(lambda p: type(p).__name__, payload) == "Payload"
    del payload
    for _ in range(100):  # the thread drops its references right after handing the result back
        gc.collect()
        if ref() is None:
            break
        await asyncio.sleep(0.01)
    assert ref() is None


async def test_a_cancelled_await_leaves_the_thread_free_for_the_next_call() -> None:
    release = threading.Event()
    call = threads.run_in_thread(release.wait, 10)
    call.cancel()
    release.set()
    assert await threads.run_in_thread(lambda: 42) == 42


async def test_a_function_that_returned_quickly_is_waited_for_on_the_spot() -> None:
    def quick() -> int:
        return 7

    # The wait on the spot is 5 ms: on a loaded machine the thread may not be scheduled within
    # it (then the call goes on through the loop, as any call does). The guarantee is that a quick
    # call *can* come back done, with no turn of the loop: seen at least once in 200 tries.
    for _ in range(200):
        assert await threads.run_in_thread(quick) == 7  # learns (again) that it is quick
        call = threads.run_in_thread(quick)
        if call.done():
            break
        assert await call == 7
    assert call.done() and call.result() == 7  # no turn of the loop to hand it back


async def test_a_quick_function_that_turns_slow_stalls_the_loop_at_most_the_quick_wait() -> None:
    slow = threading.Event()

    def sometimes_slow() -> str:
        if slow.is_set():
            time.sleep(0.3)
        return "done"

    assert await threads.run_in_thread(sometimes_slow) == "done"
    slow.set()
    loop = asyncio.get_running_loop()
    started = loop.time()
    call = threads.run_in_thread(sometimes_slow)
    assert not call.done() and loop.time() - started < 0.1  # waited at most QUICK_WAIT, then went on
    assert await call == "done"
    started = loop.time()
    again = threads.run_in_thread(sometimes_slow)  # slow last time: not waited for at all
    assert not again.done() and loop.time() - started < 0.1
    assert await again == "done"


async def test_a_function_that_outlasted_the_wait_is_waited_for_again_only_after_many_quick_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(threads, "QUICK_AGAIN", 20)
    late = threading.Event()

    def sometimes_late() -> str:
        if late.is_set():
            time.sleep(threads.QUICK_WAIT * 4)
        return "done"

    # On a loaded machine the call may miss the wait (the last quick call took over QUICK_RUN) or come
    # back done anyway (the loop's thread was not scheduled until the answer was there): try again.
    for _ in range(50):
        await quick_call(sometimes_late)  # known as quick: waited for on the spot
        late.set()
        call = threads.run_in_thread(sometimes_late)  # waited for on the spot, in vain
        assert await call == "done"
        late.clear()
        if sometimes_late.__code__ in threads._late:
            break
    assert sometimes_late.__code__ in threads._late
    for _ in range(threads.QUICK_AGAIN):  # quick every time, but not waited for: each comes through the loop
        call = threads.run_in_thread(sometimes_late)
        assert not call.done()
        assert await call == "done"
    await quick_call(sometimes_late)  # QUICK_AGAIN quick returns in a row: waited for on the spot again


async def test_many_quick_calls_at_once_each_get_their_own_result() -> None:
    def double(i: int) -> int:
        return i * 2

    for _ in range(3):
        assert await asyncio.gather(*(threads.run_in_thread(double, i) for i in range(50))) == [
            i * 2 for i in range(50)
        ]


async def quick_call(fn: Callable[[], T]) -> tuple[T, threads._QuickThread]:
    """``fn()`` once it is known as quick and handed to the quick thread, waited for on the spot."""
    for _ in range(200):  # on a loaded machine a call may miss the wait; the guarantee is that one can meet it
        await threads.run_in_thread(fn)  # learns (again) that it is quick
        call = threads.run_in_thread(fn)
        if call.done():
            assert threads._quick_thread is not None
            return call.result(), threads._quick_thread
        await call
    raise AssertionError("no call came back on the spot in 200 tries")


linux_affinity = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2, reason="Linux with two cores or more"
)


@linux_affinity
async def test_a_quick_call_runs_on_the_loops_core_in_another_thread() -> None:
    loop_thread = threading.get_ident()
    (affinity, ident), quick = await quick_call(lambda: (os.sched_getaffinity(0), threading.get_ident()))
    assert ident != loop_thread  # still a thread: a call that turns slow stalls the loop one wait at most
    assert affinity == {quick.core}  # the core the loop ran on when it handed the call over
    assert quick.core in os.sched_getaffinity(0)


@linux_affinity
async def test_a_quick_function_that_turns_slow_runs_on_any_core_again() -> None:
    slow, release = threading.Event(), threading.Event()
    seen: list[set[int]] = []

    def sometimes_slow() -> str:
        if slow.is_set():
            release.wait(10)  # until the loop has stopped waiting for it
            seen.append(os.sched_getaffinity(0))
        return "done"

    _, quick = await quick_call(sometimes_slow)
    assert quick.core != -1
    slow.set()
    call = threads.run_in_thread(sometimes_slow)  # the wait runs out: the loop goes on
    assert not call.done() and quick.core == -1
    release.set()
    assert await call == "done"
    assert seen == [os.sched_getaffinity(0)]  # not the loop's core alone: it may compute beside the loop


@linux_affinity
async def test_a_thread_a_quick_call_starts_is_not_left_on_the_loops_core() -> None:
    start_a_thread, release = threading.Event(), threading.Event()
    started: list[threading.Thread] = []

    def sometimes_starts_a_thread() -> int:
        if start_a_thread.is_set():  # a pool growing, a library's background thread
            thread = threading.Thread(target=release.wait, args=(10,), daemon=True)
            thread.start()
            started.append(thread)
        return 1

    await quick_call(sometimes_starts_a_thread)  # its next call goes to the quick thread, pinned
    start_a_thread.set()
    try:
        assert await threads.run_in_thread(sometimes_starts_a_thread) == 1
        assert started[0].native_id is not None
        assert os.sched_getaffinity(started[0].native_id) == os.sched_getaffinity(0)  # free, not the loop's core
    finally:
        release.set()


async def test_quick_calls_from_loops_in_two_threads_each_get_their_own_results() -> None:
    def square(i: int) -> int:
        return i * i

    def serve(offset: int) -> list[int]:
        async def main() -> list[int]:
            return [await threads.run_in_thread(square, offset + i) for i in range(300)]

        return asyncio.run(main())

    both = await asyncio.gather(*(asyncio.to_thread(serve, offset) for offset in (0, 1000)))
    assert both == [[i * i for i in range(300)], [(1000 + i) ** 2 for i in range(300)]]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork")
async def test_a_forked_child_runs_quick_and_slow_calls_in_threads_of_its_own() -> None:
    assert (await quick_call(lambda: 1))[0] == 1  # the parent has a quick thread and a pool
    reader, writer = os.pipe()
    with warnings.catch_warnings():  # Python 3.12 warns of a fork in a process with threads: that is the case here
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: none of the parent's threads, a fresh loop
        try:

            async def child() -> list[int]:
                return [await threads.run_in_thread(lambda i=i: i, i) for i in range(50)] + [
                    await threads.run_in_thread(time.sleep, 0.01) or 0
                ]

            got = asyncio.run(asyncio.wait_for(child(), 10))
            os.write(writer, b"ok" if got == [*range(50), 0] else b"wrong")
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, whatever it is
            os.write(writer, repr(exc).encode()[:200])
        finally:
            os._exit(0)
    os.close(writer)
    loop = asyncio.get_running_loop()
    answer = await loop.run_in_executor(None, os.read, reader, 256)
    os.close(reader)
    await loop.run_in_executor(None, os.waitpid, pid, 0)
    assert answer == b"ok"


async def test_a_signal_raised_before_the_hand_over_leaves_the_quick_thread_free(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def quick() -> int:
        return 7

    _, thread = await quick_call(quick)
    pin = threads._QuickThread.pin

    def interrupted(self: threads._QuickThread) -> None:
        monkeypatch.setattr(threads._QuickThread, "pin", pin)  # once: as a Ctrl-C landing in pin() would
        raise KeyboardInterrupt

    monkeypatch.setattr(threads._QuickThread, "pin", interrupted)
    with pytest.raises(KeyboardInterrupt):
        threads.run_in_thread(quick)
    assert not thread.busy
    assert (await quick_call(quick))[1] is thread  # the next quick call is handed to it, as before
