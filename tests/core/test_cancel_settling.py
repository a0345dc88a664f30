"""A cancel says whether anything of the run still runs: ``settling`` names the steps still running
(a thread cannot be stopped) until the process running them says they ended."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from agent_unit import Run, RunStatus, define_agent
from agent_unit.testing import create_test_unit

from ..conftest import StoreFactory


def charging(started: threading.Event, release: threading.Event, done: list[str]) -> Any:
    @define_agent
    async def agent(input: None, run: Run) -> str:
        def charge() -> str:
            started.set()
            release.wait(120)  # a blocking call to a payment API: no way to stop it half-way
            done.append("charged")
            return "charged"

        return await run.step("charge", charge)

    return agent


async def until(check: Callable[[], Any], seconds: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not await check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_a_cancel_names_the_step_whose_thread_still_runs_until_it_ends() -> None:
    started, release, done = threading.Event(), threading.Event(), []
    unit = create_test_unit({"a": charging(started, release, done)})
    try:
        record = await unit.engine.start("a", None)
        await asyncio.to_thread(started.wait, 10)
        cancelled = await unit.engine.cancel(record.id, settle=0.2)
        assert cancelled.status == RunStatus.cancelled and cancelled.settling == ["charge"] and done == []
        release.set()

        async def settled() -> bool:
            return (await unit.get(record.id)).settling is None

        await until(settled)
        assert done == ["charged"]  # the side effect finished after the cancel: the record said so until then
        assert (await unit.events(record.id))[-1]["type"] == "RUN_CANCELLED"  # the events end there
        assert (await unit.get(record.id)).status == RunStatus.cancelled
    finally:
        release.set()
        await unit.close()


async def test_a_cancel_waits_for_a_step_that_ends_soon_and_then_says_nothing_runs() -> None:
    started, release, done = threading.Event(), threading.Event(), []
    unit = create_test_unit({"a": charging(started, release, done)})
    try:
        record = await unit.engine.start("a", None)
        await asyncio.to_thread(started.wait, 10)
        asyncio.get_running_loop().call_later(0.2, release.set)
        cancelled = await unit.engine.cancel(record.id)
        assert cancelled.status == RunStatus.cancelled and cancelled.settling is None and done == ["charged"]
    finally:
        release.set()
        await unit.close()


async def test_a_cancel_of_a_parked_run_has_nothing_to_settle() -> None:
    @define_agent
    async def agent(input: None, run: Run) -> None:
        await run.interrupt("wait")

    unit = create_test_unit({"a": agent})
    parked = await unit.run("a")
    cancelled = await unit.cancel(parked.id)
    assert cancelled.status == RunStatus.cancelled and cancelled.settling is None
    await unit.close()


async def test_a_cancel_from_another_process_names_the_step_there_until_that_process_says_it_ended(
    store_factory: StoreFactory,
) -> None:
    started, release, done = threading.Event(), threading.Event(), []
    executing = create_test_unit({"a": charging(started, release, done)}, store_factory(), lease_ttl="0.6s")
    other = create_test_unit({"a": charging(started, release, done)}, store_factory(), clock=executing.clock)
    try:
        record = await executing.engine.start("a", None)
        await asyncio.to_thread(started.wait, 10)

        async def shown() -> bool:
            return any(event["type"] == "STEP_STARTED" for event in await other.events(record.id))

        await until(shown)
        cancelled = await other.engine.cancel(record.id, settle=0.1)
        assert cancelled.status == RunStatus.cancelled and cancelled.settling == ["charge"]
        await asyncio.sleep(0.5)  # the executing process hears of the cancel at its next lease renewal
        assert (await other.get(record.id)).settling == ["charge"] and done == []  # its thread still runs
        release.set()

        async def settled() -> bool:
            return (await other.get(record.id)).settling is None

        await until(settled)
        assert done == ["charged"]
    finally:
        release.set()
        await executing.close()
        await other.close()
