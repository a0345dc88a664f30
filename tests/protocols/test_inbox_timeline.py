"""The inbox's run timeline, output and error views, and its run list at 10,000 runs.

One headless Chromium and one uvicorn server for the whole module (a store seeded with 10,000
runs of its own agent, so every page here is drawn against a store of that size); each test
starts its own runs and finds them by id or by a thread of its own, so the tests do not depend
on one another or on their order.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agent_unit import RunEngine
from agent_unit._ids import new_id
from agent_unit._records import RunRecord, RunStatus
from agent_unit.stores.sqlite import SQLiteStore

from ..support import fetch
from ..support.crash import start_and_kill
from ..support.server import Server
from .test_inbox import CHROMIUM_ARGS, chromium_path

# Playwright and the inbox's PydanticAI agents are imported where they are used, not here: they cost
# ~0.6 s of CPU, which every pytest worker paid to collect this module.
if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.slow  # drives a real Chromium: left out of `make check`

SEEDED = 10_000
SEEDED_AGENT = "chatty"
SEEDED_THREAD = "seeded"


async def seed(path: Path) -> None:
    """10,000 finished and waiting runs, written through the store's public API."""
    store = SQLiteStore(str(path))
    now = datetime.now(UTC)
    statuses = [RunStatus.completed, RunStatus.failed, RunStatus.cancelled, RunStatus.completed]
    try:
        for i in range(SEEDED):
            run = RunRecord(
                id=new_id("run"),
                agent=SEEDED_AGENT,
                thread_id=SEEDED_THREAD,
                status=statuses[i % len(statuses)],
                input=i,
                output=i if i % 4 == 0 else None,
                created_at=now,
                updated_at=now,
            )
            await store.create_run(run)
    finally:
        await store.close()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("inbox") / "inbox.db"
    asyncio.run(seed(path))
    return path


@pytest.fixture(scope="module")
def server(db: Path) -> Iterator[Server]:
    served = Server(
        f"sqlite:///{db}",
        env={"TEST_AGENTS": "tests.support.inbox_agents:AGENTS", "TEST_OPTIONS": json.dumps({"ui": True})},
    ).start()
    yield served
    served.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=30_000)  # as in test_inbox.py: slow machines pass
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    opened = context.new_page()
    opened.on("dialog", lambda dialog: dialog.accept())
    yield opened
    context.close()


def start(server: Server, agent: str, input: Any, *, wait: bool = True, thread_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"input": input, **({"thread_id": thread_id} if thread_id else {})}
    response = fetch.post(f"{server.url}/agents/{agent}/runs{'?wait=1' if wait else ''}", json=body, timeout=30)
    response.raise_for_status()
    return response.json()  # type: ignore[no-any-return]


def row(page: Page, name: str) -> Any:
    """The timeline row whose button names ``name``."""
    return (
        page.get_by_role("list", name="Timeline")
        .get_by_role("listitem")
        .filter(has=page.get_by_role("button", name=name))
    )


# -- the timeline --------------------------------------------------------------------------------


def test_a_retried_step_a_sleep_and_an_interrupt_appear_on_the_timeline_live(server: Server, page: Page) -> None:
    from playwright.sync_api import expect

    run = start(server, "journey", "o-1", wait=False)  # the page opens while the step is still failing
    page.goto(f"{server.url}/ui/#/runs/{run['id']}")
    fetch = row(page, "step fetch-stock")
    expect(fetch).to_contain_text("3 attempts")  # two failed attempts, then one that answered
    expect(fetch.locator(".tl-bar.attempt")).to_have_count(3)
    expect(fetch.locator(".tl-bar.attempt.failed")).to_have_count(2)
    # woken by the server about a second later (measured between two events' times: 997 ms reads as such)
    expect(row(page, "sleep Sleeps")).to_contain_text(re.compile(r"slept (9\d\d ms|1(\.\d)? s)"))
    waiting = row(page, "wait Waits for an answer: confirm-order")
    expect(waiting).to_contain_text("so far")

    fetch.get_by_role("button").click()
    expect(fetch.get_by_role("button")).to_have_attribute("aria-expanded", "true")
    expect(fetch).to_contain_text("Attempt 1 failed")
    expect(fetch).to_contain_text("ConnectionError: the supplier timed out (try 1)")

    page.get_by_label("Answer").check()
    page.get_by_role("button", name="Send answer").click()
    expect(row(page, "step place-order")).to_be_visible()  # drawn from the live stream, no reload
    expect(waiting).to_contain_text("answered after")
    expect(row(page, "end Finished")).to_be_visible()
    expect(fetch).to_contain_text("Attempt 2 failed")  # the open details survive the live redraws


def test_model_and_tool_calls_show_under_the_agent_turn_with_token_usage(server: Server, page: Page) -> None:
    from playwright.sync_api import expect

    run = start(server, "shopper", "what does a pear cost?")
    assert run["status"] == "completed", run
    page.goto(f"{server.url}/ui/#/runs/{run['id']}")
    models = page.get_by_role("list", name="Timeline").locator(".tl-row.model")
    expect(models).to_have_count(2)  # asks for the tool, then answers with its result
    expect(models.first).to_contain_text("in /")
    expect(models.first).to_contain_text("out tokens")
    tool = row(page, "tool look_up_price")
    tool.get_by_role("button").click()
    expect(tool).to_contain_text("Input")
    expect(tool.locator(".tl-detail")).to_contain_text('"item"')
    expect(tool).to_contain_text("3 EUR")  # its output
    answer = models.last
    answer.get_by_role("button").click()
    expect(answer.locator(".tl-detail")).to_contain_text("Token usage")


def test_a_two_day_sleep_reads_as_such_and_the_steps_before_it_stay_visible(
    server: Server, page: Page, db: Path
) -> None:
    from playwright.sync_api import expect

    run = start(server, "napper", "x")
    assert run["status"] == "sleeping"
    page.goto(f"{server.url}/ui/#/runs/{run['id']}")
    expect(row(page, "sleep Sleeps")).to_contain_text("(2 days)")
    track = page.locator(".tl-row.step .track").first.bounding_box()
    sleep = row(page, "sleep Sleeps").locator(".tl-bar").bounding_box()
    last_step = page.locator(".tl-row.step .tl-bar").last.bounding_box()
    assert track and sleep and last_step
    # Two days of sleep take a fixed share of the track (12%); the milliseconds of work before it,
    # the rest, in proportion to the run's own event times (not the wall clock: under load the
    # gap between the last step and the sleep's event can be longer than the steps themselves).
    assert sleep["width"] <= track["width"] * 0.13
    assert sleep["x"] >= track["x"] + track["width"] * 0.86
    with ThreadPoolExecutor(1) as pool:  # Playwright's loop runs on this thread
        times = pool.submit(asyncio.run, event_times(db, run["id"])).result()
    began = min(min(at) for at in times.values())  # the track starts at the first event
    slept = times["RUN_SLEEPING"][0]
    expected = 88 * (times["STEP_FINISHED"][-1] - began) / max(slept - began, 1)
    drawn = 100 * (last_step["x"] + last_step["width"] - track["x"]) / track["width"]
    assert abs(drawn - expected) <= 2, (drawn, expected, times)


async def event_times(db: Path, run_id: str) -> dict[str, list[int]]:
    """The timestamps (ms) of a run's events, by type, read through the store's public API."""
    store = SQLiteStore(str(db))
    try:
        events = [event.to_dict() for event in await store.read_events(run_id)]
    finally:
        await store.close()
    times: dict[str, list[int]] = {}
    for event in events:
        times.setdefault(event["type"], []).append(event["timestamp"])
    return times


def test_a_yield_and_a_recovery_after_a_crash_are_drawn_from_the_events(server: Server, page: Page) -> None:
    from playwright.sync_api import expect

    page.goto(f"{server.url}/ui/#/runs/none")  # the page's scripts, on a page of their own
    expect(page.get_by_role("heading", name="Run not found")).to_be_visible()
    t = 1_700_000_000_000
    events = [
        {"type": "RUN_STARTED", "metadata": {"agent-unit": {"attempt": 1}}, "timestamp": t},
        {"type": "STEP_STARTED", "stepName": "<b>a</b>", "timestamp": t + 10},  # shown as text, never as HTML
        {"type": "STEP_FINISHED", "stepName": "<b>a</b>", "timestamp": t + 20},
        {"type": "CUSTOM", "name": "agent-unit.yield", "value": None, "timestamp": t + 30},
        {"type": "STEP_STARTED", "stepName": "b", "timestamp": t + 900},  # in the continuation
        {"type": "RUN_STARTED", "metadata": {"agent-unit": {"attempt": 2}}, "timestamp": t + 60_000},
        {"type": "STEP_STARTED", "stepName": "b", "timestamp": t + 60_010},
        {"type": "STEP_FINISHED", "stepName": "b", "timestamp": t + 60_030},
        {"type": "RUN_FINISHED", "result": "ok", "timestamp": t + 60_040},
    ]
    page.evaluate(
        """events => {
            const view = Timeline.view(h);  // the page's own element builder
            document.getElementById("main").replaceChildren(view.el);
            view.update(Timeline.build(events.map((data, i) => ({ seq: i + 1, data }))), Date.now());
        }""",
        events,
    )
    expect(row(page, "yield Yielded: continued in a fresh invocation")).to_contain_text("")
    cut = page.locator(".tl-row.step.cut")
    expect(cut).to_have_count(1)  # the step the crash cut short
    expect(cut).to_contain_text("cut short")
    expect(row(page, "recovery Recovered after a crash (attempt 2)")).to_be_visible()
    expect(page.locator(".tl-row.step.done")).to_have_count(2)
    expect(row(page, "step <b>a</b>")).to_be_visible()
    expect(page.locator(".timeline b")).to_have_count(0)


def test_a_run_recovered_after_a_kill_9_shows_the_step_the_crash_cut_short(
    server: Server, page: Page, db: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    from ..support.inbox_agents import AGENTS

    async def crash_and_recover() -> RunRecord:
        run_id = await start_and_kill(db, "tests.support.inbox_agents:AGENTS", "crashy", "x", marker=tmp_path / "hang")
        # A sweep here recovers it (the module's server may sweep first: either is a recovery).
        engine = RunEngine(AGENTS, SQLiteStore(str(db)), lease_ttl="1s", background_sweep=False)
        try:
            deadline = time.monotonic() + 30
            while (record := await engine.get(run_id)).status != RunStatus.completed:
                assert time.monotonic() < deadline, record
                await engine.sweep(wait=True)
                await asyncio.sleep(0.1)
            return record
        finally:
            await engine.aclose()
            await engine.store.close()

    with ThreadPoolExecutor(1) as thread:  # Playwright's own event loop runs in this one
        recovered = thread.submit(asyncio.run, crash_and_recover()).result()
    assert recovered.status == RunStatus.completed
    run_id = recovered.id
    page.goto(f"{server.url}/ui/#/runs/{run_id}")
    expect(row(page, "recovery Recovered after a crash (attempt 2)")).to_be_visible()
    steps = page.locator(".tl-row.step")
    expect(steps).to_have_count(3)  # reserve; charge, cut short by the kill; charge again
    expect(steps.nth(1)).to_contain_text("cut short")
    expect(steps.nth(2)).to_have_class(re.compile(r"\bdone\b"))
    steps.nth(1).get_by_role("button").click()
    expect(steps.nth(1)).to_contain_text("the process stopped here")


# -- each state's page ---------------------------------------------------------------------------


def test_a_running_run_shows_its_running_step_and_is_cancelled_from_its_page(server: Server, page: Page) -> None:
    from playwright.sync_api import expect

    run = start(server, "slow", "x", wait=False)
    page.goto(f"{server.url}/ui/#/runs/{run['id']}")
    expect(page.locator("dl.facts")).to_contain_text("running")
    expect(row(page, "step work")).to_contain_text("running")
    page.get_by_role("button", name="Cancel run").click()
    expect(page.locator("dl.facts")).to_contain_text("cancelled")
    expect(row(page, "end Cancelled")).to_be_visible()
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)


def test_a_completed_runs_output_is_a_json_tree_that_folds(server: Server, page: Page) -> None:
    from playwright.sync_api import expect

    run = start(server, "quote", "o-9")
    page.goto(f"{server.url}/ui/#/runs/{run['id']}")
    tree = page.locator(".json-tree")
    expect(tree).to_contain_text("total: 42.5")
    lines = tree.locator("details").filter(has_text="lines").last
    expect(lines.locator(".leaf").first).to_be_visible()
    lines.locator("summary").first.click()  # fold the array
    expect(lines.locator(".leaf").first).to_be_hidden()
    raw = page.locator(".output pre.raw").text_content() or ""
    assert json.loads(raw) == {"order": "o-9", "total": 42.5, "lines": ["widget", "gadget"]}
    text = start(server, "chatty", 0)
    page.goto(f"{server.url}/ui/#/runs/{text['id']}")
    expect(page.locator("pre.output")).to_have_text("0")


def test_a_failed_runs_error_shows_its_type_message_and_the_frames_of_the_users_code(
    server: Server, page: Page
) -> None:
    from playwright.sync_api import expect

    run = start(server, "broken", "x")
    assert run["status"] == "failed"
    page.goto(f"{server.url}/ui/#/runs/{run['id']}")
    error = page.get_by_role("alert")
    expect(error).to_contain_text("KeyError: 'missing'")
    frames = page.get_by_role("list", name="Where it was raised").get_by_role("listitem")
    expect(frames).to_have_count(1)
    expect(frames.first).to_contain_text("tests/support/inbox_agents.py:")  # relative to the server's working directory
    expect(frames.first).to_contain_text('return str(totals["missing"])')
    assert "agent_unit" not in (page.locator(".frames").text_content() or "")
    expect(row(page, "end Failed")).to_contain_text("")


def test_an_interrupted_and_a_sleeping_run_show_what_they_wait_for(server: Server, page: Page) -> None:
    from playwright.sync_api import expect

    asked = start(server, "refund", {"order_id": "o-5"})
    page.goto(f"{server.url}/ui/#/runs/{asked['id']}")
    expect(page.get_by_role("heading", name="Waiting for: approve-refund")).to_be_visible()
    expect(row(page, "wait Waits for an answer: approve-refund")).to_be_visible()
    sleeping = start(server, "napper", "y")
    page.goto(f"{server.url}/ui/#/runs/{sleeping['id']}")
    expect(page.locator("dl.facts")).to_contain_text("Wakes")
    expect(page.get_by_role("button", name="Cancel run")).to_be_visible()


# -- the list --------------------------------------------------------------------------------------


def test_the_first_page_of_10000_runs_is_read_from_an_index_and_the_list_pages_with_a_cursor(
    server: Server, page: Page, db: Path
) -> None:
    # How fast is measured apart, never by a timed assertion here: this proves the shape that keeps it fast.
    from playwright.sync_api import expect

    for status in (None, "completed"):
        query = f"?status={status}" if status else ""
        first = fetch.get(f"{server.url}/runs{query}", timeout=10).json()
        assert len(first["runs"]) == 50 and first["next_cursor"]
    with sqlite3.connect(db) as connection:  # the list's queries walk an index, not the table
        for where in ("", "WHERE status = 'completed' AND id < 'run_~' ", "WHERE agent = 'chatty' "):
            plan = " ".join(
                str(row[-1])
                for row in connection.execute(f"EXPLAIN QUERY PLAN SELECT * FROM runs {where}ORDER BY id DESC LIMIT 51")
            )
            assert "TEMP B-TREE" not in plan, plan  # read in id order and stopped at the limit: no sort of them all
    seen, cursor = 0, ""
    while True:
        params: dict[str, str | int] = {"agent": SEEDED_AGENT, "thread_id": SEEDED_THREAD, "limit": 200}
        if cursor:
            params["cursor"] = cursor
        listed = fetch.get(f"{server.url}/runs", params=params, timeout=10).json()
        seen += len(listed["runs"])
        cursor = listed["next_cursor"]
        if not cursor:
            break
    assert seen == SEEDED

    page.goto(f"{server.url}/ui/")
    runs = page.get_by_role("list", name="Runs").get_by_role("listitem")
    expect(runs.first).to_be_visible()
    count = runs.count()
    page.get_by_role("button", name="More runs").click()
    expect(runs).to_have_count(count + 50)


def test_new_runs_and_status_changes_appear_in_the_list_without_a_reload(server: Server, page: Page) -> None:
    from playwright.sync_api import expect

    thread = f"live-{uuid.uuid4().hex[:8]}"
    first = start(server, "refund", {"order_id": "o-6"}, thread_id=thread)
    page.goto(f"{server.url}/ui/#/?thread_id={thread}")
    runs = page.get_by_role("list", name="Runs").get_by_role("listitem")
    expect(runs).to_have_count(1)
    expect(page.get_by_role("status")).to_have_text("1 run(s), 1 waiting for an answer")
    second = start(server, "chatty", 1, thread_id=thread)
    expect(runs).to_have_count(2)
    expect(runs.nth(1)).to_contain_text(second["id"])  # below the one waiting for an answer
    fetch.post(f"{server.url}/runs/{first['id']}/resume", json={"answer": {"approved": True}}, timeout=10)
    expect(runs.first.locator(".badge")).to_have_text("completed")
    expect(page.get_by_role("status")).to_contain_text("0 waiting for an answer")


def test_a_run_is_found_by_its_id(server: Server, page: Page) -> None:
    from playwright.sync_api import expect

    run = start(server, "quote", "o-7")
    page.goto(f"{server.url}/ui/")
    page.get_by_label("Run id").fill(f"  {run['id']} ")
    page.get_by_role("button", name="Find").click()
    expect(page.get_by_role("heading", name=f"Run {run['id']}")).to_be_focused()
    page.goto(f"{server.url}/ui/")
    page.get_by_label("Run id").fill("run_nothing")
    page.get_by_label("Run id").press("Enter")
    expect(page.get_by_role("status")).to_have_text("No run has the id run_nothing.")
    expect(page.get_by_label("Run id")).to_be_focused()


# -- dark, narrow, keyboard ------------------------------------------------------------------------


def test_in_dark_mode_at_375_px_the_timeline_fits_and_is_used_with_the_keyboard(
    server: Server, browser: Browser
) -> None:
    from playwright.sync_api import expect

    run = start(server, "journey", "o-8")
    context = browser.new_context(viewport={"width": 375, "height": 800}, color_scheme="dark", is_mobile=True)
    try:
        phone = context.new_page()
        for path in ("/ui/", f"/ui/#/runs/{run['id']}"):
            phone.goto(server.url + path)
            expect(phone.get_by_role("heading", level=1)).to_be_focused()
            expect(phone.get_by_role("main").locator("li").first).to_be_visible()
            assert phone.evaluate("() => document.documentElement.scrollWidth") == 375, path
        background = phone.evaluate("() => getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(13, 17, 23)"  # the system's dark setting
        expect(row(phone, "step fetch-stock")).to_contain_text("3 attempts")
        for _ in range(60):
            phone.keyboard.press("Tab")
            if phone.evaluate("() => document.activeElement.classList.contains('tl-name')"):
                break
        phone.keyboard.press("Enter")
        expect(phone.locator(".tl-name").first).to_have_attribute("aria-expanded", "true")
        expect(phone.locator(".tl-detail").first).to_be_visible()
        assert phone.evaluate("() => document.documentElement.scrollWidth") == 375
    finally:
        context.close()
