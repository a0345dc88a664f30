"""Scheduled tasks in one process: configuration, handlers, and the in-process scheduler's ticks."""

from __future__ import annotations

import asyncio
import logging
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from agent_unit import create_agent_unit
from agent_unit._clock import ManualClock
from agent_unit._scheduler import Scheduler
from agent_unit._tasks import Task, load_handler, run_task, tasks_from_config
from agent_unit.errors import ConfigError, StoreUnavailable, TaskError
from agent_unit.stores.memory import MemoryStore
from agent_unit_cli.config import load_config

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)  # a Monday, 08:00 UTC

LEDGER: list[tuple[str, datetime]] = []


async def record(name: str, scheduled_at: datetime) -> str:
    LEDGER.append((name, scheduled_at))
    return f"{name} at {scheduled_at:%H:%M}"


def record_in_a_thread(name: str, scheduled_at: datetime) -> str:
    LEDGER.append((name, scheduled_at))
    return "sync"


async def fail(name: str, scheduled_at: datetime) -> None:
    raise RuntimeError("the mail server is down")


@pytest.fixture(autouse=True)
def _clear_ledger() -> None:
    LEDGER.clear()


def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> str:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("schedule = 'every day'\nhandler = 'app.tasks:run'", "tasks.digest.schedule: schedule 'every day': use five"),
        ("schedule = '0 8 1 * 1'\nhandler = 'app.tasks:run'", "restricts both day-of-month (1) and day-of-week (1)"),
        ("schedule = '0 8 * * FRI'\nhandler = 'app.tasks:run'", "the day-of-week field 'FRI' is not portable"),
        ("schedule = '0 25 * * *'\nhandler = 'app.tasks:run'", "schedule '0 25 * * *': bad hour value"),
        (
            "schedule = '0 8 * * *'\nhandler = 'app/tasks.py'",
            "handler: 'app/tasks.py': write 'module:function'",
        ),
        ("schedule = '0 8 * * *'", "tasks.digest.handler: Field required"),
    ],
)
def test_a_bad_task_table_is_one_error_naming_the_key_and_what_to_write(
    tmp_path: Path, table: str, message: str
) -> None:
    (tmp_path / "agent-unit.toml").write_text(f"[tasks.digest]\n{table}\n")
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path)
    assert str(raised.value).startswith("agent-unit.toml: tasks.digest.")
    assert message in str(raised.value)


def test_a_handler_module_that_does_not_exist_is_named(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match=r"task digest: handler 'nowhere_at_all:run': no module named 'nowhere_at_all'"):
        load_handler("nowhere_at_all:run", task="digest", root=tmp_path)


def test_a_missing_attribute_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = module(tmp_path, monkeypatch, "jobs_attr", "async def send(name, at):\n    pass\n")
    with pytest.raises(TaskError, match=r"module jobs_attr has no attribute 'sned'"):
        load_handler(f"{name}:sned", task="digest")


def test_a_module_that_fails_to_import_shows_the_users_own_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = module(tmp_path, monkeypatch, "jobs_broken", "import os\nSETTING = os.environ['AU_NOT_SET_ANYWHERE']\n")
    with pytest.raises(TaskError) as raised:
        load_handler(f"{name}:send", task="digest")
    message = raised.value.message
    assert "jobs_broken failed to import: KeyError: 'AU_NOT_SET_ANYWHERE'" in message
    assert f"{tmp_path / 'jobs_broken.py'}, line 2: SETTING = os.environ['AU_NOT_SET_ANYWHERE']" in message
    assert "importlib" not in message and "agent_unit" not in message


def test_a_module_importing_a_missing_package_is_not_mistaken_for_a_wrong_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = module(tmp_path, monkeypatch, "jobs_dep", "import some_package_not_installed\n")
    with pytest.raises(TaskError, match=r"jobs_dep failed to import: ModuleNotFoundError: .*line 1"):
        load_handler(f"{name}:send", task="digest")


async def test_handlers_get_the_tasks_name_and_an_aware_utc_time_async_or_in_a_thread() -> None:
    assert await run_task(Task("a", "0 8 * * *", f"{__name__}:record"), T0) == "a at 08:00"
    assert await run_task(Task("b", "0 8 * * *", f"{__name__}:record_in_a_thread"), T0) == "sync"
    assert LEDGER == [("a", T0), ("b", T0)]
    assert all(at.tzinfo is UTC for _, at in LEDGER)


def tasks(**schedules: str) -> dict[str, Task]:
    return tasks_from_config({name: {"schedule": s, "handler": f"{__name__}:record"} for name, s in schedules.items()})


async def test_two_schedulers_over_one_store_run_each_tick_once() -> None:
    store, clock = MemoryStore(), ManualClock(T0 + timedelta(seconds=5))
    first = Scheduler(tasks(beat="* * * * *", digest="*/2 * * * *"), store, clock=clock, owner="one")
    second = Scheduler(tasks(beat="* * * * *", digest="*/2 * * * *"), store, clock=clock, owner="two")
    for _ in range(4):
        won = await asyncio.gather(first.tick(wait=True), second.tick(wait=True))
        assert len(won[0]) + len(won[1]) == len({tick for ticks in won for tick in ticks})
        assert await first.tick(wait=True) == []  # the same moment again: nothing new
        clock.advance(timedelta(minutes=1))
    expected = [("beat", T0 + timedelta(minutes=m)) for m in range(4)]
    expected += [("digest", T0 + timedelta(minutes=m)) for m in (0, 2)]
    assert sorted(LEDGER) == sorted(expected)


async def test_a_tick_missed_while_no_server_ran_runs_once_at_start_if_within_an_hour() -> None:
    store = MemoryStore()
    half_hour_late = Scheduler(tasks(digest="0 8 * * *"), store, clock=ManualClock(T0 + timedelta(minutes=30)))
    assert await half_hour_late.tick(wait=True) == [("digest", T0)]
    restarted = Scheduler(tasks(digest="0 8 * * *"), store, clock=ManualClock(T0 + timedelta(minutes=31)))
    assert await restarted.tick(wait=True) == []  # a server that restarts never runs a tick again
    assert LEDGER == [("digest", T0)]


async def test_a_tick_missed_by_more_than_an_hour_is_skipped_and_the_next_one_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(T0 + timedelta(hours=2))
    scheduler = Scheduler(tasks(digest="0 8 * * *"), MemoryStore(), clock=clock)
    with caplog.at_level(logging.INFO, logger="agent_unit.scheduler"):
        assert await scheduler.tick(wait=True) == []
    assert "was missed while no server ran: skipped" in caplog.text
    clock.advance(timedelta(days=1) - timedelta(hours=2))
    assert await scheduler.tick(wait=True) == [("digest", T0 + timedelta(days=1))]


async def test_a_failing_handler_is_logged_with_its_own_lines_and_the_next_tick_still_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(T0)
    failing = tasks_from_config({"mail": {"schedule": "* * * * *", "handler": f"{__name__}:fail"}})
    scheduler = Scheduler(failing, MemoryStore(), clock=clock)
    with caplog.at_level(logging.ERROR, logger="agent_unit.scheduler"):
        await scheduler.tick(wait=True)
        clock.advance(timedelta(minutes=1))
        assert await scheduler.tick(wait=True) == [("mail", T0 + timedelta(minutes=1))]
    [first, _] = [r for r in caplog.records if r.name == "agent_unit.scheduler"]
    assert "task mail (tick 2026-03-02T08:00:00+00:00) failed" in first.getMessage()
    assert 'raise RuntimeError("the mail server is down")' in first.getMessage()
    assert "RuntimeError: the mail server is down" in first.getMessage()
    assert "agent_unit/" not in first.getMessage()


class FlakyStore(MemoryStore):
    """A memory store that is unavailable while ``down``, as a locked file or a lost network is."""

    down = False

    async def claim_tick(self, task: str, scheduled_at: float, owner: str, *, now: float, expires: float) -> bool:
        if self.down:
            raise StoreUnavailable("the store stayed locked by another process for 5 s")
        return await super().claim_tick(task, scheduled_at, owner, now=now, expires=expires)

    async def lapsed_ticks(self, task: str, *, since: float, now: float) -> list[float]:
        if self.down:
            raise StoreUnavailable("the store stayed locked by another process for 5 s")
        return await super().lapsed_ticks(task, since=since, now=now)


async def test_a_tick_whose_claimant_died_mid_handler_runs_again_once_after_its_lease_lapses(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, clock = MemoryStore(), ManualClock(T0 + timedelta(seconds=5))
    # a server claimed the 08:00 tick and was killed inside its handler: the claim is never finished
    assert await store.claim_tick("digest", T0.timestamp(), "killed", now=clock.time(), expires=clock.time() + 60)
    first = Scheduler(tasks(digest="0 8 * * *"), store, clock=clock, owner="first")
    second = Scheduler(tasks(digest="0 8 * * *"), store, clock=clock, owner="second")
    assert await first.tick(wait=True) == []  # its lease still runs: the claimant may be alive
    clock.advance(timedelta(seconds=61))
    with caplog.at_level(logging.WARNING, logger="agent_unit.scheduler"):
        won = await asyncio.gather(first.tick(wait=True), second.tick(wait=True))
    assert sorted(won, key=len) == [[], [("digest", T0)]]  # taken over by exactly one
    assert "stopped before it finished: running it again" in caplog.text
    clock.advance(timedelta(minutes=10))
    restarted = Scheduler(tasks(digest="0 8 * * *"), store, clock=clock, owner="restarted")
    assert await restarted.tick(wait=True) == [] and await first.tick(wait=True) == []  # finished: never again
    assert LEDGER == [("digest", T0)]


async def test_a_handler_that_raises_finishes_its_tick_so_it_is_not_run_again() -> None:
    store, clock = MemoryStore(), ManualClock(T0)
    failing = tasks_from_config({"mail": {"schedule": "0 8 * * *", "handler": f"{__name__}:fail"}})
    assert await Scheduler(failing, store, clock=clock).tick(wait=True) == [("mail", T0)]
    clock.advance(timedelta(minutes=5))
    assert await store.lapsed_ticks("mail", since=T0.timestamp(), now=clock.time()) == []
    assert await Scheduler(failing, store, clock=clock).tick(wait=True) == []


async def test_a_claim_the_store_cannot_take_is_tried_again_and_the_tick_runs_once_it_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, clock = FlakyStore(), ManualClock(T0 + timedelta(seconds=1))
    scheduler = Scheduler(tasks(digest="0 8 * * *"), store, clock=clock)
    store.down = True  # e.g. another process holds the SQLite file's write lock across 08:00
    with caplog.at_level(logging.INFO, logger="agent_unit.scheduler"):
        assert await scheduler.tick(wait=True) == []
        assert scheduler.retrying
        clock.advance(timedelta(seconds=20))
        assert await scheduler.tick(wait=True) == []
        store.down = False
        clock.advance(timedelta(seconds=20))
        assert await scheduler.tick(wait=True) == [("digest", T0)]
    assert not scheduler.retrying
    assert await scheduler.tick(wait=True) == []
    assert LEDGER == [("digest", T0)]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # one line per outage, not one per try
    assert "cannot use the store" in warnings[0] and "waiting to be claimed: digest at 2026-03-02T08:00" in warnings[0]
    assert "can use the store again" in caplog.text


async def test_a_tick_the_store_could_not_take_within_catch_up_is_skipped_with_a_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, clock = FlakyStore(), ManualClock(T0 + timedelta(seconds=1))
    scheduler = Scheduler(tasks(digest="0 8 * * *"), store, clock=clock, catch_up=timedelta(minutes=10))
    store.down = True
    assert await scheduler.tick(wait=True) == []
    clock.advance(timedelta(minutes=11))
    store.down = False
    with caplog.at_level(logging.WARNING, logger="agent_unit.scheduler"):
        assert await scheduler.tick(wait=True) == []
    assert "was never claimed: the store was unavailable for longer than catch_up (0:10:00)" in caplog.text
    assert LEDGER == []


def test_a_server_starts_its_scheduler_in_the_lifespan_and_runs_the_current_tick() -> None:
    app = create_agent_unit(
        {}, store="memory://", tasks={"beat": {"schedule": "* * * * *", "handler": f"{__name__}:record_in_a_thread"}}
    )
    with TestClient(app):
        while not LEDGER:  # the current minute's tick, caught up at start (the test's timeout bounds this)
            time.sleep(0.01)
    [(name, at)] = LEDGER
    assert name == "beat" and at.second == 0 and timedelta(0) <= datetime.now(UTC) - at < timedelta(minutes=2)
    assert create_agent_unit({}, store="memory://").scheduler is None


def test_an_unimportable_handler_fails_when_the_app_is_made_not_at_the_first_tick() -> None:
    with pytest.raises(TaskError, match="no module named 'nowhere_at_all'"):
        create_agent_unit({}, store="memory://", tasks={"x": {"schedule": "* * * * *", "handler": "nowhere_at_all:x"}})


def test_on_lambda_an_eventbridge_delivery_runs_its_tick_once_even_when_delivered_twice() -> None:
    from agent_unit.hosts.aws_lambda import lambda_handler

    handler = lambda_handler(
        lambda: create_agent_unit({}, store="memory://", background_sweep=False),
        tasks={"digest": {"schedule": "0 8 * * *", "handler": f"{__name__}:record"}},
    )
    event = {"agent_unit": "task", "task": "digest", "scheduled_at": "2026-03-02T08:00:00Z"}
    first, again = handler(event, None), handler(event, None)  # EventBridge delivers at least once
    assert first == {"task": "digest", "scheduled_at": "2026-03-02T08:00:00+00:00", "ran": True}
    assert again["ran"] is False
    assert LEDGER == [("digest", T0)]
    with pytest.raises(TaskError, match="no task named 'digets' in this build: the tasks are digest"):
        handler({"agent_unit": "task", "task": "digets"}, None)


async def test_on_vercel_a_tasks_cron_request_runs_its_latest_tick_once_and_needs_the_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import httpx

    from agent_unit.hosts.vercel import create_app

    monkeypatch.setenv("CRON_SECRET", "cron-secret-123")
    monkeypatch.delenv("AGENT_UNIT_SECRET", raising=False)
    app = create_app(
        {},
        store="memory://",
        base_path="/api",
        tasks={"beat": {"schedule": "* * * * *", "handler": f"{__name__}:record"}},
    )
    cron = {"authorization": "Bearer cron-secret-123"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        assert (await client.get("/api/__agent-unit/tasks/beat")).status_code == 401
        first = await client.get("/api/__agent-unit/tasks/beat", headers=cron)
        again = await client.get("/api/__agent-unit/tasks/beat", headers=cron)
        unknown = await client.get("/api/__agent-unit/tasks/nope", headers=cron)
    await app.engine.aclose()
    assert first.status_code == 200 and first.json()["ran"] is True
    assert again.json()["ran"] is False or again.json()["scheduled_at"] != first.json()["scheduled_at"]
    assert len(LEDGER) == 1 + again.json()["ran"]  # a second call in the same minute runs nothing
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "task_not_found"


def _fastapi_app(events: list[str]) -> object:
    import contextlib

    from fastapi import FastAPI

    from agent_unit.env import wait_until

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):  # type: ignore[no-untyped-def]
        events.append("app started")
        yield
        events.append("app stopped")

    app = FastAPI(lifespan=lifespan)

    @app.post("/order")
    async def order() -> dict[str, bool]:
        async def receipt() -> None:
            await asyncio.sleep(0.1)
            events.append("receipt sent")

        wait_until(receipt())
        return {"ok": True}

    return app


def test_a_users_own_app_on_a_server_gets_its_lifespan_the_scheduler_and_a_drained_shutdown(tmp_path: Path) -> None:
    from agent_unit.hosts.server import serve

    events: list[str] = []
    beat = {"beat": {"schedule": "* * * * *", "handler": f"{__name__}:record_in_a_thread"}}
    app = serve(_fastapi_app(events), tasks=beat, store=f"sqlite:///{tmp_path / 'ticks.db'}")
    with TestClient(app) as client:  # type: ignore[arg-type]
        assert client.post("/order").json() == {"ok": True}
        while not LEDGER:  # the scheduler started after the app's startup and caught up this minute
            time.sleep(0.01)
    assert events == ["app started", "receipt sent", "app stopped"]  # drained before the app's shutdown
    assert [name for name, _ in LEDGER] == ["beat"]


def test_an_app_without_a_lifespan_still_gets_the_scheduler_and_the_drain(tmp_path: Path) -> None:
    from agent_unit.hosts.server import serve

    async def no_lifespan(scope: dict, receive: object, send: object) -> None:  # as Django's ASGI app
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")

    beat = {"beat": {"schedule": "* * * * *", "handler": f"{__name__}:record_in_a_thread"}}
    with TestClient(serve(no_lifespan, tasks=beat, store="memory://")):  # type: ignore[arg-type]
        while not LEDGER:
            time.sleep(0.01)
    assert [name for name, _ in LEDGER] == ["beat"]


def test_agent_unit_dev_schedules_the_configured_tasks_from_the_project_folder(tmp_path: Path) -> None:
    import shutil

    from agent_unit_cli import dev

    shutil.copytree(
        Path(__file__).resolve().parents[1] / "support" / "fixtures" / "project_ok" / "agents", tmp_path / "agents"
    )
    (tmp_path / "devjobs.py").write_text("def tidy(name, scheduled_at):\n    return 'tidied'\n")
    (tmp_path / "agent-unit.toml").write_text('[tasks.tidy]\nschedule = "*/5 * * * *"\nhandler = "devjobs:tidy"\n')
    app = dev.create_app(tmp_path)
    assert app.scheduler is not None and list(app.scheduler.tasks) == ["tidy"]
    assert app.scheduler.tasks["tidy"].schedule == "*/5 * * * *"
