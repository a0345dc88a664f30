"""The Worker and its two Durable Object classes, run in the Workers *simulation* (workers_sim).

Each flow goes through the Worker's ``fetch`` (or ``scheduled``, or an alarm) as Cloudflare
would deliver it. A *new isolate* is a new Worker and new object instances over the same
storage, as after a deploy or an eviction; the old isolate's handles stop working.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from . import agents as fixtures
from .deployment import SECRET, Deployment
from .workers_sim import uninstall


@pytest.fixture(autouse=True)
def no_threads_signals_or_subprocesses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pyodide has none of them: a flow that would start one fails here."""
    import signal
    import subprocess
    import threading

    def refusing(original: Any) -> Any:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            frame = sys._getframe(1)
            while frame is not None:  # the test runner's own (its timeout, asyncio's runner) is allowed
                if str(frame.f_globals.get("__name__", "")).startswith(("agent_unit", "tests.hosts.cloudflare")):
                    raise AssertionError("the Worker runtime started a thread, a signal handler or a subprocess")
                frame = frame.f_back  # type: ignore[assignment]
            return original(*args, **kwargs)

        return refuse

    # Sync steps run inline under Pyodide (sys.platform "emscripten"), in a worker thread on CPython:
    # the simulation runs them as Pyodide does.
    monkeypatch.setattr("agent_unit.run.STEP_THREADS", False)
    monkeypatch.setattr(threading.Thread, "start", refusing(threading.Thread.start))
    monkeypatch.setattr(signal, "signal", refusing(signal.signal))
    monkeypatch.setattr(subprocess.Popen, "__init__", refusing(subprocess.Popen.__init__))


@pytest.fixture
async def deployment() -> AsyncIterator[Deployment]:
    fixtures.calls.clear()
    fixtures.gate.clear()
    yield Deployment()
    fixtures.gate.set()
    uninstall()


async def test_the_refund_flow_pauses_in_one_isolate_and_completes_in_another_charging_once(
    deployment: Deployment,
) -> None:
    deployment.boot()
    started = await deployment.json("POST", "/agents/refund/runs?wait=1", {"input": {"order_id": "o1"}})
    assert started["status"] == "interrupted"
    run_id = started["id"]
    inbox = await deployment.json("GET", "/runs?status=interrupted")
    assert [run["id"] for run in inbox["runs"]] == [run_id]

    deployment.boot()  # a new isolate over the same storage
    resumed = await deployment.json("POST", f"/runs/{run_id}/resume?wait=1", {"answer": {"approved": True}})
    assert resumed["status"] == "completed"
    assert resumed["output"] == "refunded"
    assert fixtures.calls["charge o1"] == 1
    assert (await deployment.json("GET", f"/runs/{run_id}"))["status"] == "completed"
    assert (await deployment.json("GET", "/runs?status=completed"))["runs"][0]["id"] == run_id
    again = await deployment.call("POST", f"/runs/{run_id}/resume", {"answer": {"approved": True}})
    assert again.status == 409
    assert fixtures.calls["charge o1"] == 1


async def test_each_run_lives_in_its_own_object_and_a_bad_answer_leaves_it_parked(deployment: Deployment) -> None:
    deployment.boot()
    first = await deployment.json("POST", "/agents/refund/runs?wait=1", {"input": {"order_id": "a"}})
    second = await deployment.json("POST", "/agents/refund/runs?wait=1", {"input": {"order_id": "b"}})
    run_objects = [key for key in deployment.sim.storage if key[0] == "AgentUnitRun"]
    assert len(run_objects) == 2
    bad = await deployment.call("POST", f"/runs/{first['id']}/resume", {"answer": {"approved": "maybe"}})
    assert bad.status == 422
    assert (await deployment.json("GET", f"/runs/{first['id']}"))["status"] == "interrupted"
    assert (await deployment.json("GET", f"/runs/{second['id']}"))["status"] == "interrupted"
    missing = await deployment.call("GET", "/runs/run_00000000000000000000000000")
    assert missing.status == 404
    assert (await missing.json())["error"]["code"]


async def test_a_sleep_is_woken_by_the_run_objects_alarm(deployment: Deployment) -> None:
    deployment.boot()
    started = await deployment.json("POST", "/agents/napper/runs?wait=1", {"input": "fox"})
    assert started["status"] == "sleeping"
    (alarm,) = deployment.sim.alarms().values()
    assert alarm == pytest.approx((deployment.clock.time() + 3600) * 1000)

    assert await deployment.sim.deliver_alarms() == 0  # not due yet
    deployment.advance(3600)
    deployment.boot()  # the object was evicted meanwhile
    assert await deployment.sim.deliver_alarms() == 1
    done = await deployment.json("GET", f"/runs/{started['id']}")
    assert done["status"] == "completed"
    assert done["output"] == "rested fox"
    assert fixtures.calls == {"before nap": 1, "after nap": 1}
    assert deployment.sim.alarms() == {}  # finished, no retention: nothing left to wake


async def test_an_interrupt_deadline_is_the_run_objects_alarm(deployment: Deployment) -> None:
    deployment.boot()
    started = await deployment.json("POST", "/agents/approver/runs?wait=1", {"input": "leave"})
    assert started["status"] == "interrupted" and started["interrupt"]["expires_at"]
    (alarm,) = deployment.sim.alarms().values()
    assert alarm == pytest.approx((deployment.clock.time() + 2 * 86400) * 1000, abs=1)

    assert await deployment.sim.deliver_alarms() == 0  # not due yet
    deployment.advance(2 * 86400)
    deployment.boot()  # the object was evicted meanwhile
    assert await deployment.sim.deliver_alarms() == 1
    done = await deployment.json("GET", f"/runs/{started['id']}")
    assert done["status"] == "completed" and done["output"] == "leave: nobody answered"
    assert done["answers"][0]["expired"] is True


async def test_an_alarm_delivered_twice_repeats_no_completed_step(deployment: Deployment) -> None:
    deployment.boot()
    started = await deployment.json("POST", "/agents/napper/runs?wait=1", {"input": "owl"})
    deployment.advance(3600)
    assert await deployment.sim.deliver_alarms(again=True) == 2
    done = await deployment.json("GET", f"/runs/{started['id']}")
    assert done["status"] == "completed"
    assert fixtures.calls == {"before nap": 1, "after nap": 1}
    events = await deployment.call("GET", f"/runs/{started['id']}/events")
    assert (await events.text()).count('"type":"RUN_FINISHED"') == 1


async def test_an_alarm_in_a_fresh_isolate_with_no_request_before_it_reads_the_workers_secrets(
    deployment: Deployment,
) -> None:
    deployment.boot()
    started = await deployment.json("POST", "/agents/keeper/runs?wait=1", {"input": "x"})
    assert started["status"] == "sleeping"
    deployment.boot()  # evicted: the alarm is the new isolate's first event
    deployment.advance(3600)
    assert await deployment.sim.deliver_alarms() == 1
    done = await deployment.json("GET", f"/runs/{started['id']}")
    assert (done["status"], done["output"]) == ("completed", SECRET)


async def test_a_run_whose_isolate_dies_mid_step_is_recovered_by_its_alarm(deployment: Deployment) -> None:
    deployment.boot()
    started = await deployment.json("POST", "/agents/stuck/runs", {"input": "x"})
    for _ in range(50):  # let the execution reach the step that never finishes in this isolate
        if fixtures.calls["slow"]:
            break
        await _tick()
    assert fixtures.calls == {"first": 1, "slow": 1}
    assert deployment.sim.alarms(), "the alarm is set before the run executes"

    deployment.boot()  # the isolate died mid-step
    assert await deployment.sim.deliver_alarms() == 0  # the lease has not lapsed yet
    deployment.advance(31)
    assert await deployment.sim.deliver_alarms() == 1
    done = await deployment.json("GET", f"/runs/{started['id']}")
    assert done["status"] == "completed"
    assert done["attempt"] == 2
    assert fixtures.calls == {"first": 1, "slow": 2}  # the finished step is not repeated


async def test_a_run_that_yields_at_its_budget_continues_in_the_next_alarm(deployment: Deployment) -> None:
    deployment.boot(budget="0s")  # yield after every new step
    started = await deployment.json("POST", "/agents/long/runs?wait=1", {"input": 4})
    assert started["status"] == "queued"
    alarms = 0
    while (await deployment.json("GET", f"/runs/{started['id']}"))["status"] == "queued":
        alarms += await deployment.sim.deliver_alarms()
        assert alarms < 20
    done = await deployment.json("GET", f"/runs/{started['id']}")
    assert (done["status"], done["output"]) == ("completed", 6)
    assert alarms >= 3  # one step per alarm after the first slice


async def test_the_event_stream_resumes_after_last_event_id(deployment: Deployment) -> None:
    deployment.boot()
    started = await deployment.json("POST", "/agents/refund/runs?wait=1", {"input": {"order_id": "o2"}})
    run_id = started["id"]
    whole = await deployment.call("GET", f"/runs/{run_id}/events", headers={"accept": "text/event-stream"})
    assert whole.status == 200
    ids = _sse_ids(await whole.text())
    assert ids == list(range(1, len(ids) + 1)) and len(ids) >= 3

    await deployment.json("POST", f"/runs/{run_id}/resume?wait=1", {"answer": {"approved": False}})
    rest = await deployment.call(
        "GET", f"/runs/{run_id}/events", headers={"accept": "text/event-stream", "last-event-id": str(ids[-1])}
    )
    later = _sse_ids(await rest.text())
    assert later and later[0] == ids[-1] + 1
    assert "RUN_FINISHED" in (
        await (
            await deployment.call(
                "GET",
                f"/runs/{run_id}/events",
                headers={"accept": "text/event-stream", "last-event-id": str(later[-2])},
            )
        ).text()
    )


async def test_a_task_runs_from_scheduled_once_per_tick(deployment: Deployment) -> None:
    tasks = {"digest": {"schedule": "0 8 * * *", "handler": "tests.hosts.cloudflare.agents:digest"}}
    deployment.boot(crons={"0 8 * * *": ["digest"]}, tasks=tasks)
    at = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
    await deployment.sim.scheduled("0 8 * * *", at.timestamp() * 1000)
    await deployment.sim.scheduled("0 8 * * *", at.timestamp() * 1000)  # delivered again
    await deployment.sim.scheduled("*/5 * * * *", at.timestamp() * 1000)  # a cron with no task here
    assert fixtures.calls == {f"task digest {at.isoformat()}": 1}


async def test_the_internal_routes_need_the_secret_and_the_api_answers_in_json(deployment: Deployment) -> None:
    deployment.boot()
    refused = await deployment.call("POST", "/__agent-unit/sweep")
    assert refused.status == 401
    assert (await refused.json())["error"]["code"]
    manifest = await deployment.json("GET", "/agents")
    assert {agent["name"] for agent in manifest["agents"]} >= {"refund", "napper"}
    assert (await deployment.call("GET", "/healthz")).status == 200


def _sse_ids(text: str) -> list[int]:
    return [int(line.removeprefix("id:").strip()) for line in text.splitlines() if line.startswith("id:")]


async def _tick() -> None:
    import asyncio

    await asyncio.sleep(0)


async def test_wait_until_work_is_the_invocations_and_env_reads_the_workers_bindings(deployment: Deployment) -> None:
    deployment.boot(server=lambda: own_server_app(), agents=None)
    answered = await deployment.call("GET", "/hello")
    assert answered.status == 200
    assert await answered.json() == {"greeting": SECRET, "lifespans": 1}
    assert fixtures.calls["later"] == 1  # ctx.waitUntil kept it running: done before the invocation ended
    assert (await deployment.call("GET", "/hello")).status == 200
    assert own_server_lifespans == [1, 2]  # the adapter runs the app's lifespan around every request


async def test_the_default_runtime_serves_from_the_worker_and_its_cron_sweep_wakes_runs(
    deployment: Deployment,
) -> None:
    deployment.boot(runtime="default", store="memory://", crons={"* * * * *": ["agent-unit:sweep"]})
    started = await deployment.json("POST", "/agents/napper/runs?wait=1", {"input": "cat"})
    assert started["status"] == "sleeping"
    assert not [key for key in deployment.sim.storage if key[0] == "AgentUnitRun"]  # no run object used
    deployment.advance(3600)
    await deployment.sim.scheduled("* * * * *")
    done = await deployment.json("GET", f"/runs/{started['id']}")
    assert (done["status"], done["output"]) == ("completed", "rested cat")


async def test_on_the_default_runtime_a_run_started_with_a_202_is_held_by_the_invocations_wait_until(
    deployment: Deployment,
) -> None:
    deployment.boot(runtime="default", store="memory://")
    answered = await deployment.call("POST", "/agents/dawdler/runs", {"input": "x"})
    assert answered.status == 202
    started = await answered.json()
    # the invocation ended only once its waitUntil work did: Workers cut what nothing holds
    done = await deployment.json("GET", f"/runs/{started['id']}")
    assert (done["status"], done["output"]) == ("completed", "dawdled")
    assert fixtures.calls["dawdled"] == 1


own_server_lifespans: list[int] = []


def own_server_app() -> Any:
    """A user's own Starlette app (``server = "app:app"``) with a lifespan of its own."""
    import contextlib

    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from agent_unit.env import env, wait_until

    own_server_lifespans.clear()
    started = [0]

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        started[0] += 1
        yield
        own_server_lifespans.append(started[0])

    async def later() -> None:
        await _tick()
        fixtures.calls["later"] += 1

    async def hello(request: Any) -> JSONResponse:
        wait_until(later())
        return JSONResponse({"greeting": env["AGENT_UNIT_SECRET"], "lifespans": started[0]})

    return Starlette(routes=[Route("/hello", hello)], lifespan=lifespan)


MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def test_mcp_starts_a_run_in_its_own_object_and_resumes_it_from_another(deployment: Deployment) -> None:
    deployment.boot()

    async def tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        answered = await deployment.call("POST", "/mcp", call, headers=MCP_HEADERS)
        assert answered.status == 200, await answered.text()
        result: dict[str, Any] = (await answered.json())["result"]
        return result

    paused = await tool("refund", {"order_id": "m1"})
    run_id = paused["structuredContent"]["run_id"]
    assert (await deployment.json("GET", f"/runs/{run_id}"))["status"] == "interrupted"
    done = await tool("resume_run", {"run_id": run_id, "answer": {"approved": True}})
    assert done["isError"] is False, done
    assert (await deployment.json("GET", f"/runs/{run_id}"))["status"] == "completed"
    assert fixtures.calls["charge m1"] == 1
    assert deployment.sim.alarms() == {}


async def test_a_cancelled_run_is_deleted_with_its_object_storage_and_leaves_the_list(deployment: Deployment) -> None:
    deployment.boot()
    started = await deployment.json("POST", "/agents/refund/runs?wait=1", {"input": {"order_id": "c1"}})
    run_id = started["id"]
    assert (await deployment.call("DELETE", f"/runs/{run_id}")).status == 409  # still live
    cancelled = await deployment.json("POST", f"/runs/{run_id}/cancel")
    assert cancelled["status"] == "cancelled"
    assert (await deployment.call("DELETE", f"/runs/{run_id}")).status in (200, 204)
    assert (await deployment.call("GET", f"/runs/{run_id}")).status == 404
    assert (await deployment.json("GET", "/runs"))["runs"] == []


async def test_a_finished_run_is_deleted_by_its_alarm_after_its_retention(deployment: Deployment) -> None:
    deployment.boot(retention="1d")
    started = await deployment.json("POST", "/agents/napper/runs?wait=1", {"input": "eel"})
    deployment.advance(3600)
    await deployment.sim.deliver_alarms()
    assert (await deployment.json("GET", f"/runs/{started['id']}"))["status"] == "completed"
    (alarm,) = deployment.sim.alarms().values()
    assert alarm == pytest.approx((deployment.clock.time() + 86400) * 1000)
    deployment.advance(86400)
    assert await deployment.sim.deliver_alarms() == 1
    assert (await deployment.call("GET", f"/runs/{started['id']}")).status == 404
    assert (await deployment.json("GET", "/runs"))["runs"] == []


async def test_a_save_the_index_missed_stands_and_the_runs_alarm_lists_it_again(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_unit.hosts.cloudflare.durable_objects_store import RELIST_AFTER, IndexStorage

    deployment.boot()
    started = await deployment.json("POST", "/agents/refund/runs?wait=1", {"input": {"order_id": "i1"}})
    run_id = started["id"]
    listed = IndexStorage.put_run

    def unreachable(self: Any, obj: str, row: Any) -> None:
        raise RuntimeError("the index object is overloaded")

    monkeypatch.setattr(IndexStorage, "put_run", unreachable)
    resumed = await deployment.json("POST", f"/runs/{run_id}/resume?wait=1", {"answer": {"approved": True}})
    assert resumed["status"] == "completed"  # the run's own object holds the truth
    assert (await deployment.json("GET", "/runs"))["runs"][0]["status"] == "interrupted"  # the list is stale
    monkeypatch.setattr(IndexStorage, "put_run", listed)
    deployment.advance(RELIST_AFTER)
    assert await deployment.sim.deliver_alarms() == 1
    assert (await deployment.json("GET", "/runs"))["runs"][0]["status"] == "completed"
    assert fixtures.calls["charge i1"] == 1


async def test_ag_ui_and_a2a_answer_through_the_worker_as_on_every_host(deployment: Deployment) -> None:
    deployment.boot()
    body = {"threadId": "t1", "runId": "r1", "state": {}, "tools": [], "context": []}
    ask = [{"id": "m1", "role": "user", "content": json.dumps({"order_id": "g1"})}]
    sse = {"accept": "text/event-stream"}
    first = await deployment.call("POST", "/agents/refund/ag-ui", {**body, "messages": ask}, headers=sse)
    assert first.status == 200
    events = _sse_data(await first.text())
    [interrupt] = events[-1]["outcome"]["interrupts"]
    resolved = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}]
    second = await deployment.call(
        "POST", "/agents/refund/ag-ui", {**body, "runId": "r2", "messages": [], "resume": resolved}, headers=sse
    )
    finished = _sse_data(await second.text())[-1]
    assert (finished["type"], finished["result"]) == ("RUN_FINISHED", "refunded")
    assert fixtures.calls["charge g1"] == 1

    card = await deployment.json("GET", "/.well-known/agent-card.json")
    assert {skill["id"] for skill in card["skills"]} >= {"refund", "napper"}


def _sse_data(text: str) -> list[dict[str, Any]]:
    return [json.loads(line.removeprefix("data:")) for line in text.splitlines() if line.startswith("data:")]


async def test_under_a_base_path_a_runs_requests_still_reach_its_object(deployment: Deployment) -> None:
    deployment.boot(base_path="/api/agents")
    started = await deployment.json("POST", "/api/agents/agents/refund/runs?wait=1", {"input": {"order_id": "b1"}})
    assert [key for key in deployment.sim.storage if key[0] == "AgentUnitRun"]
    resumed = await deployment.json(
        "POST", f"/api/agents/runs/{started['id']}/resume?wait=1", {"answer": {"approved": True}}
    )
    assert resumed["status"] == "completed"
    assert (await deployment.call("GET", f"/runs/{started['id']}")).status == 404  # outside the base path


async def test_a_continuation_sent_to_the_worker_runs_in_a_run_object_with_the_secret_only(
    deployment: Deployment,
) -> None:
    deployment.boot(budget="0s")  # yield after every new step
    started = await deployment.json("POST", "/agents/long/runs?wait=1", {"input": 3})
    assert started["status"] == "queued"
    body = {"run_id": started["id"]}
    assert (await deployment.call("POST", "/__agent-unit/continue?wait=1", body)).status == 401
    bearer = {"authorization": f"Bearer {SECRET}"}
    continued = await deployment.call("POST", "/__agent-unit/continue?wait=1", body, headers=bearer)
    assert continued.status < 300, await continued.text()
    for _ in range(10):
        if (await deployment.json("GET", f"/runs/{started['id']}"))["status"] == "completed":
            break
        await deployment.sim.deliver_alarms()
    done = await deployment.json("GET", f"/runs/{started['id']}")
    assert (done["status"], done["output"]) == ("completed", 3), done


async def test_an_alarm_that_fails_is_retried_and_the_retry_wakes_the_run(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_unit.errors import StoreUnavailable
    from agent_unit.hosts.cloudflare.durable_objects_store import RunStorage

    deployment.boot()
    started = await deployment.json("POST", "/agents/napper/runs?wait=1", {"input": "bat"})
    deployment.advance(3600)
    save = RunStorage.save
    failures = [StoreUnavailable("the durable-objects store cannot be reached (overloaded)")]

    async def flaky(self: RunStorage, *args: Any) -> Any:
        if failures:
            raise failures.pop()
        return await save(self, *args)

    monkeypatch.setattr(RunStorage, "save", flaky)
    assert await deployment.sim.deliver_alarms() == 1  # the handler raised: Cloudflare retries it
    assert (await deployment.json("GET", f"/runs/{started['id']}"))["status"] == "sleeping"
    assert deployment.sim.alarms(), "the failed alarm is set again"
    assert await deployment.sim.deliver_alarms() == 1
    done = await deployment.json("GET", f"/runs/{started['id']}")
    assert (done["status"], done["output"]) == ("completed", "rested bat")
    assert fixtures.calls == {"before nap": 1, "after nap": 1}


async def test_an_alarm_that_finds_its_run_not_yet_due_sets_itself_again(deployment: Deployment) -> None:
    deployment.boot()
    started = await deployment.json("POST", "/agents/napper/runs?wait=1", {"input": "elk"})
    [(key, alarm)] = deployment.sim.alarms().items()
    deployment.sim.storage[key].alarm = alarm - 60_000  # delivered a minute early
    deployment.advance(3600 - 60)
    assert await deployment.sim.deliver_alarms() == 1
    assert (await deployment.json("GET", f"/runs/{started['id']}"))["status"] == "sleeping"
    assert deployment.sim.alarms() == {key: alarm}
    deployment.advance(60)
    assert await deployment.sim.deliver_alarms() == 1
    assert (await deployment.json("GET", f"/runs/{started['id']}"))["status"] == "completed"
