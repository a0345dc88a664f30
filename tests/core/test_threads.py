"""Sync step functions run in worker threads: results, errors and context come back exactly."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading
import time
import weakref

import pytest

from agent_unit import threads
from agent_unit.callables import call

name: contextvars.ContextVar[str] = contextvars.ContextVar("name", default="none")


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

    assert await threads.run_in_thread(quick) == 7  # learns that it is quick
    call = threads.run_in_thread(quick)
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


async def test_many_quick_calls_at_once_each_get_their_own_result() -> None:
    def double(i: int) -> int:
        return i * 2

    for _ in range(3):
        assert await asyncio.gather(*(threads.run_in_thread(double, i) for i in range(50))) == [
            i * 2 for i in range(50)
        ]


async def test_a_function_quick_in_the_threads_runs_on_the_loops_thread_once_it_proved_quick() -> None:
    here = threading.get_ident()

    def quick() -> int:
        return threading.get_ident()

    seen = [await call(quick, (), threads=True) for _ in range(threads.INLINE_AFTER)]
    assert here not in seen  # proving itself: every call in a worker thread
    assert await call(quick, (), threads=True) == here  # then no hop: the loop's thread runs it


async def test_a_blocking_function_never_runs_on_the_loops_thread() -> None:
    here = threading.get_ident()

    def blocking() -> int:
        time.sleep(0.001)
        return threading.get_ident()

    seen = [await call(blocking, (), threads=True) for _ in range(threads.INLINE_AFTER * 3)]
    assert here not in seen


async def test_an_inline_function_that_turns_slow_goes_back_to_the_threads_and_must_prove_quick_again() -> None:
    here = threading.get_ident()
    slow = threading.Event()

    def sometimes_slow() -> int:
        if slow.is_set():
            time.sleep(0.01)
        return threading.get_ident()

    for _ in range(threads.INLINE_AFTER):
        await call(sometimes_slow, (), threads=True)
    slow.set()
    assert await call(sometimes_slow, (), threads=True) == here  # the one call that holds up the loop
    assert await call(sometimes_slow, (), threads=True) != here  # back in the threads at once
    slow.clear()
    again = [await call(sometimes_slow, (), threads=True) for _ in range(threads.INLINE_AFTER * 2)]
    assert here not in again  # twice as many quick returns wanted now
    assert await call(sometimes_slow, (), threads=True) == here


async def test_an_inline_call_sees_the_callers_context_and_its_changes_stay_inside_it() -> None:
    name.set("caller")

    def reads_and_sets() -> str:
        seen = name.get()
        name.set("changed inside")
        return seen

    for _ in range(threads.INLINE_AFTER + 2):
        assert await call(reads_and_sets, (), threads=True) == "caller"
        assert name.get() == "caller"


async def test_a_function_that_raised_is_never_taken_for_quick() -> None:
    here = threading.get_ident()
    where: list[int] = []

    def fails() -> None:
        where.append(threading.get_ident())
        raise KeyError("nope")

    for _ in range(threads.INLINE_AFTER * 2):
        with pytest.raises(KeyError):
            await call(fails, (), threads=True)
    assert here not in where
