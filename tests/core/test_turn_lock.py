"""The lock an execution's commits, flushes and saves take turns on (agent_unit._execution.TurnLock).

Its free case is taken without awaiting; these check that it is still a lock: one holder at a
time, waiters served in arrival order, and a waiter cancelled before or just after it was handed
the lock never leaves it held with nobody to release it.
"""

from __future__ import annotations

import asyncio

import pytest

from agent_unit._execution import TurnLock


async def test_one_holder_at_a_time_and_waiters_in_arrival_order() -> None:
    lock = TurnLock()
    order: list[int] = []
    inside = 0

    async def worker(i: int) -> None:
        nonlocal inside
        async with lock:
            inside += 1
            assert inside == 1
            order.append(i)
            await asyncio.sleep(0)
            inside -= 1

    assert lock.take()  # held: every worker waits, in the order it arrived
    tasks = [asyncio.create_task(worker(i)) for i in range(5)]
    await asyncio.sleep(0)
    assert not lock.take() and lock.locked()
    lock.release()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]
    assert not lock.locked() and lock.take()


async def test_a_cancelled_waiter_leaves_the_lock_to_the_next() -> None:
    lock = TurnLock()
    assert lock.take()
    cancelled = asyncio.create_task(lock.acquire())
    waiting = asyncio.create_task(lock.acquire())
    await asyncio.sleep(0)
    cancelled.cancel()
    await asyncio.sleep(0)
    lock.release()
    assert await asyncio.wait_for(waiting, 1)
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    lock.release()
    assert not lock.locked()


async def test_a_waiter_cancelled_after_it_was_handed_the_lock_passes_it_on() -> None:
    lock = TurnLock()
    assert lock.take()
    handed = asyncio.create_task(lock.acquire())
    after = asyncio.create_task(lock.acquire())
    await asyncio.sleep(0)
    lock.release()  # hands the lock to ``handed``, which has not run yet
    handed.cancel()  # and is cancelled before it does
    with pytest.raises(asyncio.CancelledError):
        await handed
    assert await asyncio.wait_for(after, 1)  # it passed the lock on instead of keeping it
    lock.release()
    assert not lock.locked()
    with pytest.raises(RuntimeError):
        lock.release()
