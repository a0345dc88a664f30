"""The Redis store under a burst: a caller queues for one of the store's pooled connections (a
bounded wait, then a 503 with Retry-After), never fails at once, and a follower of a run's events
holds no connection while it waits for the next one.

The app is served by a real uvicorn server in the test's event loop, so the requests of a burst
are as concurrent as they are in production, and the test can look at the store's pool.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from agent_unit import create_agent_unit
from agent_unit.errors import StoreConfigError
from agent_unit.stores import open_store

from ..support import fetch
from ..support.http_agents import AGENTS
from ..support.server import Server, free_port
from ..support.servers import RedisServer


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """``app`` on uvicorn in this event loop, until the block ends: its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    deadline = time.monotonic() + 30
    while not server.started:
        assert not task.done() and time.monotonic() < deadline, "uvicorn did not start"
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)


def client(url: str) -> httpx.AsyncClient:
    """As many connections as the test opens, and a timeout far beyond any wait of the store."""
    return fetch.AsyncClient(base_url=url, limits=httpx.Limits(max_connections=None), timeout=120)


def in_use(app: Any) -> int:
    """Connections of the store's pool handed out now (the live tail's subscription is not one)."""
    return len(app.engine.store._redis.connection_pool._in_use_connections)


async def test_a_burst_of_300_list_requests_on_a_healthy_redis_all_answer(redis_url: str) -> None:
    server = Server(redis_url).start()  # a server process, as in production: the burst comes from outside
    try:
        async with client(server.url) as http:
            for n in range(6):
                started = await http.post("/agents/refund/runs?wait=1", json={"input": {"order_id": f"o_{n}"}})
                assert started.status_code == 200, started.text
            answers = await asyncio.gather(*(http.get("/runs?limit=5") for _ in range(300)))
    finally:
        server.stop()
    statuses = collections.Counter(answer.status_code for answer in answers)
    assert statuses == {200: 300}, [answer.text for answer in answers if answer.status_code != 200][:3]
    assert all(len(answer.json()["runs"]) == 5 for answer in answers)


async def test_500_followers_on_a_healthy_redis_all_get_the_run_to_its_end_and_hold_no_connection_while_they_wait(
    redis_url: str,
) -> None:
    # The pool as it ships (50 connections), with a longer wait for one than its default 10 s: the
    # test's own 500 clients share this process with the server, so on a CI machine whose cores are
    # many times oversubscribed a burst could queue past 10 s, answer 503s and end streams (by design:
    # a stream the store cuts tells its client to reconnect). That is the busy store's test below.
    # Keep-alives far apart: a follower reads the store once per keep-alive (its own test is below),
    # and on a loaded CI machine those reads would land in the window that looks at waiting alone.
    app = create_agent_unit(AGENTS, store=f"{redis_url}&pool_timeout=60", keepalive_seconds=600)
    async with serving(app) as url, client(url) as http:
        run = (await http.post("/agents/refund/runs?wait=1", json={"input": {"order_id": "o_1"}})).json()
        assert run["status"] == "interrupted"
        waiting = 0

        async def follow() -> tuple[int, list[str]]:
            nonlocal waiting
            async with http.stream("GET", f"/runs/{run['id']}/events?follow=1") as stream:
                if stream.status_code != 200:
                    return stream.status_code, [(await stream.aread()).decode()]
                lines = []
                async for line in stream.aiter_lines():  # a cut stream raises here, or ends early
                    lines.append(line)
                    if "RUN_INTERRUPTED" in line:
                        waiting += 1  # it has every event so far: from now on it waits
                    if "RUN_FINISHED" in line:
                        break
                return stream.status_code, lines

        # The subscription starts at the first reader; when it is heard, every reader reads once more
        # (writes before it were not heard). Hear it first, so the window below sees only waiting.
        app.engine.tail.listen(run["id"])
        deadline = time.monotonic() + 30
        while not app.engine.tail.hearing:
            assert time.monotonic() < deadline, "the Redis subscription was never heard"
            await asyncio.sleep(0.05)
        followers = [asyncio.create_task(follow()) for _ in range(500)]
        try:
            deadline = time.monotonic() + 120
            while waiting < 500 and not any(task.done() for task in followers):
                assert time.monotonic() < deadline, f"only {waiting} of 500 followers got the run's events"
                await asyncio.sleep(0.05)
            assert waiting == 500, [task.result() for task in followers if task.done()][:3]

            # A follower has the events before its handler's last read returns its connection: under load
            # those reads may still be in flight, so let them settle (they must, and soon) before the window.
            deadline = time.monotonic() + 30
            while in_use(app) > 10:
                assert time.monotonic() < deadline, f"{in_use(app)} connections still in use by 500 waiting followers"
                await asyncio.sleep(0.05)
            # 500 wait for the run's next event, over more than one poll interval: hardly a connection in use
            busiest = 0
            for _ in range(60):
                busiest = max(busiest, in_use(app))
                await asyncio.sleep(0.05)
            assert busiest <= 10, busiest

            resumed = await http.post(f"/runs/{run['id']}/resume", json={"answer": {"approved": True}})
            assert resumed.status_code in (200, 202), resumed.text
            results = await asyncio.wait_for(asyncio.gather(*followers), 120)
        finally:  # a failure leaves no follower for the event loop's teardown to wait on
            for task in followers:
                task.cancel()
            await asyncio.wait_for(asyncio.gather(*followers, return_exceptions=True), 30)
    statuses = collections.Counter(status for status, _ in results)
    assert statuses == {200: 500}, [lines for status, lines in results if status != 200][:3]
    for _, lines in results:  # every follower saw the run to its end, none was cut midway
        assert any("RUN_FINISHED" in line for line in lines), lines[-5:]
        assert not any("interrupted" in line for line in lines), [line for line in lines if "interrupted" in line]


async def test_followers_opened_together_never_read_the_store_together_again(redis_url: str) -> None:
    """A follower reads the store once per keep-alive, at a random point of each interval: a burst
    of followers opened at once never reads it all at once again (a pool-sized burst of reads at
    every keep-alive, for as long as they follow), and each still gets its keep-alives."""
    from agent_unit.http.stream import KEEP_ALIVE, read_stream

    app = create_agent_unit(AGENTS, store=redis_url)
    engine = app.engine
    try:
        run = await engine.start("refund", {"order_id": "o_1"}, wait=True)
        assert run.status == "interrupted", run
        after = (await engine.events(run.id))[-1].seq
        engine.tail.listen(run.id)  # the subscription: from now on the followers wait for notifications
        deadline = time.monotonic() + 30
        while not engine.tail.hearing:
            assert time.monotonic() < deadline, "the Redis subscription was never heard"
            await asyncio.sleep(0.05)

        reads: dict[asyncio.Task[Any] | None, list[float]] = collections.defaultdict(list)
        events = engine.events

        async def timed(*args: Any, **kwargs: Any) -> Any:
            reads[asyncio.current_task()].append(time.monotonic())
            return await events(*args, **kwargs)

        engine.events = timed  # type: ignore[method-assign]
        # Waits spread over half a keep-alive (1 s here): a loaded machine's loop that stalls for a
        # few hundred ms bunches what falls in the stall, never most of the followers.
        keepalive, stop = 2.0, asyncio.Event()
        kept: collections.Counter[int] = collections.Counter()

        async def follow(n: int) -> None:
            stream = read_stream(
                engine, run.id, after=after, follow=True, keepalive=keepalive, poll_interval=0.2, stop=stop
            )
            async for item in stream:
                assert item is KEEP_ALIVE, item  # the run is parked: nothing else comes
                kept[n] += 1

        followers = [asyncio.create_task(follow(n)) for n in range(200)]
        # Until every follower has read past its first two reads (the one at open, the first wait)
        # three times: however slowly a loaded machine runs the loop, the same reads are compared.
        deadline = time.monotonic() + 90
        while len(reads) < 200 or min(len(times) for times in reads.values()) < 5:
            assert time.monotonic() < deadline, sorted(len(times) for times in reads.values())[:5]
            await asyncio.sleep(0.1)
        stop.set()
        await asyncio.wait_for(asyncio.gather(*followers), 30)
    finally:
        await engine.aclose()
    # Who reads within 0.2 s of whom, past each follower's first two reads (all opened within a few ms).
    settled = sorted((at, task) for task, times in reads.items() for at in times[2:])
    busiest = max(
        len({task for _, task in settled[i : bisect.bisect_left(settled, (at + 0.2,))]})
        for i, (at, _) in enumerate(settled)
    )
    assert busiest <= 150, f"{busiest} of 200 followers read the store within 0.2 s of each other"
    assert min(kept[n] for n in range(200)) >= 3, kept.most_common()[-3:]


async def test_a_redis_that_stalls_longer_than_the_pool_wait_answers_503_with_retry_after_then_recovers(
    redis_server: RedisServer, redis_url: str
) -> None:
    import redis.asyncio as redis

    app = create_agent_unit(AGENTS, store=f"{redis_url}&max_connections=2&pool_timeout=0.5")
    admin = redis.Redis.from_url(redis_server.url)
    async with serving(app) as url, client(url) as http:
        assert (await http.get("/runs")).status_code == 200
        await admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")  # Redis answers nobody for 3 s

        async def timed() -> tuple[httpx.Response, float]:
            began = time.monotonic()
            answer = await http.get("/runs?limit=5")
            return answer, time.monotonic() - began

        timings = await asyncio.gather(*(timed() for _ in range(20)))
        answers = [answer for answer, _ in timings]
        refused = [answer for answer in answers if answer.status_code == 503]
        assert len(refused) >= 15, collections.Counter(answer.status_code for answer in answers)
        assert {answer.status_code for answer in answers} <= {200, 503}  # a 503 or an answer: never a 500
        for answer in refused:
            assert answer.json()["error"]["code"] == "store_unavailable"
            assert "busy" in answer.json()["error"]["message"]
            assert int(answer.headers["retry-after"]) >= 1
        # each waited for a connection before it was refused: none failed at once
        assert min(took for answer, took in timings if answer.status_code == 503) >= 0.45

        await admin.execute_command("CLIENT", "UNPAUSE")
        # Recovered: every request answers again. Two at a time, one per connection of the pool: 50 at
        # once would be a burst of their own, which a loaded CI machine may rightly refuse after 0.5 s.
        again = [
            answer for _ in range(25) for answer in await asyncio.gather(*(http.get("/runs?limit=5") for _ in range(2)))
        ]
        assert [answer.status_code for answer in again] == [200] * 50
    await admin.aclose()


async def test_a_caller_queues_for_a_connection_of_a_full_pool_instead_of_failing(redis_url: str) -> None:
    from .test_conformance import make_record

    store = open_store(f"{redis_url}&max_connections=1&pool_timeout=30")
    records = [make_record() for _ in range(50)]
    await asyncio.gather(*(store.create_run(record) for record in records))
    loaded = await asyncio.gather(*(store.load_run(record.id) for record in records))
    assert [record.id for record in loaded if record] == [record.id for record in records]
    await store.close()


@pytest.mark.parametrize("value", ["soon", "-1"])
def test_a_pool_timeout_that_is_not_a_number_of_seconds_is_refused_naming_it(redis_url: str, value: str) -> None:
    with pytest.raises(StoreConfigError, match=f"pool_timeout={value!r}"):
        open_store(f"{redis_url}&pool_timeout={value}")


async def test_a_follower_whose_process_loses_the_subscription_still_gets_another_process_s_writes() -> None:
    """Followers wait for the store's notifications instead of polling while the subscription
    hears every write; once it is lost they read again at once, and poll until it is back."""
    import redis.asyncio as redis

    store = RedisServer().start()
    admin = redis.Redis.from_url(store.url)
    # no read for a keep-alive for long; a poll, while there is no subscription, soon
    app = create_agent_unit(AGENTS, store=store.url, keepalive_seconds=120.0, poll_interval=0.2)
    other = create_agent_unit(AGENTS, store=store.url)  # another server process over the same Redis
    try:
        async with serving(app) as url, client(url) as http:
            run = (await http.post("/agents/refund/runs?wait=1", json={"input": {"order_id": "o_1"}})).json()
            seen: list[str] = []

            async def follow() -> None:
                async with http.stream("GET", f"/runs/{run['id']}/events?follow=1") as stream:
                    async for line in stream.aiter_lines():
                        seen.append(line)
                        if "RUN_FINISHED" in line:
                            return

            follower = asyncio.create_task(follow())
            deadline = time.monotonic() + 30
            while not (app.engine.tail.hearing and any("RUN_INTERRUPTED" in line for line in seen)):
                assert time.monotonic() < deadline and not follower.done(), seen
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # past the polls of before: the follower waits for a notification now

            # the subscription is cut, and cannot come back: the writes of other processes go unheard
            await admin.execute_command("ACL", "SETUSER", "default", "-subscribe")
            await admin.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
            while app.engine.tail.hearing:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=other), base_url="http://unit") as there:
                resumed = await there.post(f"/runs/{run['id']}/resume?wait=1", json={"answer": {"approved": True}})
                assert resumed.json()["status"] == "completed", resumed.text
            await asyncio.wait_for(follower, 20)  # polled: well before the keep-alive's read

            await admin.execute_command("ACL", "SETUSER", "default", "+subscribe")  # back: it hears every write again
            while not app.engine.tail.hearing:
                assert time.monotonic() < deadline + 30
                await asyncio.sleep(0.05)
    finally:
        await other.engine.aclose()
        await admin.aclose()
        store.stop()
