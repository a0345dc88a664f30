"""The approvals inbox, driven in a real headless Chromium against a real uvicorn server.

Chromium is apt's ``chromium`` (``.ci/run`` installs it); without it these tests are skipped
locally and fail under ``CI=true``. ``AGENT_UNIT_SCREENSHOT=1`` writes docs/inbox.png.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from starlette.requests import Request
from starlette.testclient import TestClient
from typer.testing import CliRunner

from agent_unit import create_agent_unit
from agent_unit.errors import ConfigError
from agent_unit.http import create_inbox
from agent_unit_cli.config import load_config
from agent_unit_cli.main import app as cli

from ..support import fetch
from ..support.server import ROOT, Server, free_port, wait_until_up
from ..support.servers import missing

# Playwright and the inbox's PydanticAI agents are imported where a browser is launched, a page is
# checked or an agent is served, not here: they cost ~0.6 s of CPU, which every pytest worker paid
# to collect this module (and the modules that import its fixtures).
if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Response

pytestmark = pytest.mark.slow  # drives a real Chromium: left out of `make check`


FIXTURES = Path(__file__).resolve().parents[1] / "support" / "fixtures"

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and Path("/usr/bin/chromium").exists():
        found = "/usr/bin/chromium"
    if found is None:
        missing("chromium")
    return str(found)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=30_000)  # a wait for a condition, not a timing assertion: slow machines pass
    executable = chromium_path()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module: each test starts runs on a thread of its own and lists only that thread."""
    served = Server(
        f"sqlite:///{tmp_path_factory.mktemp('inbox') / 'inbox.db'}",
        env={"TEST_AGENTS": "tests.support.inbox_agents:AGENTS", "TEST_OPTIONS": json.dumps({"ui": True})},
    ).start()
    yield served
    served.stop()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    opened = context.new_page()
    opened.on("dialog", lambda dialog: dialog.accept())  # the confirm() before cancel and delete
    yield opened
    context.close()


def start(server: Server, agent: str, input: Any, thread_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"input": input}
    if thread_id:
        body["thread_id"] = thread_id
    response = fetch.post(f"{server.url}/agents/{agent}/runs?wait=1", json=body, timeout=30)
    response.raise_for_status()
    return response.json()  # type: ignore[no-any-return]


def new_thread() -> str:
    return f"thread-{uuid.uuid4().hex[:10]}"


def get_run(server: Server, run_id: str) -> dict[str, Any]:
    return fetch.get(f"{server.url}/runs/{run_id}", timeout=10).json()  # type: ignore[no-any-return]


def last_seq(server: Server, run_id: str) -> int:
    text = fetch.get(f"{server.url}/runs/{run_id}/events", timeout=10).text
    return max(int(seq) for seq in re.findall(r"^id: (\d+)$", text, re.MULTILINE))


def focused_label(page: Page) -> str:
    return str(
        page.evaluate(
            "() => { const e = document.activeElement;"
            " return ((e.labels && e.labels[0] && e.labels[0].textContent) || e.textContent || '').trim(); }"
        )
    )


def tab_to(page: Page, label: str) -> None:
    """Press Tab (only Tab) until the element labelled ``label`` has the focus."""
    for _ in range(40):
        page.keyboard.press("Tab")
        if focused_label(page) == label:
            return
    raise AssertionError(f"Tab never reached {label!r}")


# -- in the browser ----------------------------------------------------------------------------


def test_a_paused_run_is_listed_first_answered_after_a_restart_and_seen_finishing_live(
    server: Server, page: Page
) -> None:
    from playwright.sync_api import expect

    thread = new_thread()
    paused = start(server, "refund", {"order_id": "o-1"}, thread_id=thread)
    assert paused["status"] == "interrupted"
    assert start(server, "chatty", 1, thread_id=thread)["status"] == "completed"
    plain = fetch.get(f"{server.url}/runs", params={"thread_id": thread}).json()["runs"]
    assert [run["agent"] for run in plain] == ["chatty", "refund"]  # newest first, as the API lists them
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    streams: list[tuple[str, str | None]] = []  # (url, Last-Event-ID) of each event stream the server answered

    def answered(response: Response) -> None:
        if "/events" in response.url:
            streams.append((response.url, response.request.all_headers().get("last-event-id")))

    page.on("response", answered)

    page.goto(f"{server.url}/ui/#/?thread_id={thread}")
    runs = page.get_by_role("list", name="Runs").get_by_role("listitem")
    expect(runs).to_have_count(2)
    expect(runs.first).to_contain_text("refund: approve-refund")  # the interrupted one first
    runs.first.get_by_role("link").click()
    expect(page.get_by_role("heading", name=f"Run {paused['id']}")).to_be_focused()
    events = page.get_by_role("list", name="Events")
    expect(events).to_contain_text("RUN_INTERRUPTED")
    expect(page.get_by_text("Live.")).to_be_visible()

    server.restart()  # between the pause and the approval, with the page open

    page.get_by_label("Approved").check()
    page.get_by_role("button", name="Send answer").click()
    expect(events).to_contain_text("RUN_FINISHED")  # the live view, reconnected to the new server
    expect(page.locator("dl.facts")).to_contain_text("completed")
    expect(page.get_by_role("status")).to_have_text("Run completed")
    done = get_run(server, paused["id"])
    assert done["status"] == "completed" and done["output"] == "refunded"
    assert all(url.startswith(server.url + "/") for url in requests)  # nothing from anywhere else
    # The stream dropped by the restart picked up after the last event it had (seq 4), not from 0.
    assert streams[0] == (f"{server.url}/runs/{paused['id']}/events?follow=1&after=0", None)
    assert len(streams) > 1 and all(header == "4" or url.endswith("after=4") for url, header in streams[1:])

    # A reload continues after the last event this tab saw: nothing is fetched or shown twice.
    requests.clear()
    page.reload()
    expect(events.get_by_text("RUN_FINISHED")).to_have_count(1)
    expect(events.get_by_text("RUN_INTERRUPTED")).to_have_count(1)
    reloaded = [url for url in requests if "/events" in url]
    assert reloaded and all(url.endswith(f"after={last_seq(server, paused['id'])}") for url in reloaded)


def test_an_answer_the_server_refuses_shows_its_message_beside_the_field_and_the_run_stays_parked(
    server: Server, page: Page
) -> None:
    from playwright.sync_api import expect

    run = start(server, "payout", "invoice 7")
    page.goto(f"{server.url}/ui/#/runs/{run['id']}")
    page.get_by_label("Approved").check()
    page.get_by_label("Priority").select_option(label="high")
    page.get_by_label("Amount").fill("500")
    page.get_by_label("Name").fill("Ada")
    page.get_by_role("button", name="Send answer").click()

    amount = page.get_by_label("Amount")
    expect(amount).to_have_attribute("aria-invalid", "true")
    expect(amount).to_have_accessible_description(re.compile("amount must be at most 100"))
    expect(amount).to_be_focused()
    expect(page.get_by_role("alert")).to_contain_text("the answer does not fit interrupt 'approve-payout'")
    if os.environ.get("AGENT_UNIT_SCREENSHOT") == "1":
        (ROOT / "docs").mkdir(exist_ok=True)
        page.screenshot(path=str(ROOT / "docs" / "inbox.png"), full_page=True)
    assert get_run(server, run["id"])["status"] == "interrupted"

    amount.fill("50")
    page.get_by_role("button", name="Send answer").click()
    expect(page.locator("dl.facts")).to_contain_text("completed")
    assert get_run(server, run["id"])["output"] == "paid 50 to Ada (high, no note)"


def test_a_tool_approval_is_declined_with_a_reason(server: Server, page: Page) -> None:
    from playwright.sync_api import expect

    run = start(server, "deploy", "billing")
    page.goto(f"{server.url}/ui/#/runs/{run['id']}")
    expect(page.get_by_role("heading", name="Waiting for: tool-approval")).to_be_visible()
    expect(page.get_by_role("main")).to_contain_text('"service": "billing"')
    expect(page.get_by_role("button", name="Approve")).to_be_visible()
    page.get_by_label("Reason (optional)").fill("not on a Friday")
    page.get_by_role("button", name="Decline").click()
    expect(page.locator("dl.facts")).to_contain_text("completed")
    assert get_run(server, run["id"])["output"] == "declined: not on a Friday"


def test_the_form_is_filled_and_sent_with_the_keyboard_alone(server: Server, page: Page) -> None:
    from playwright.sync_api import expect

    thread = new_thread()
    run = start(server, "payout", "invoice 8", thread_id=thread)
    page.goto(f"{server.url}/ui/#/?thread_id={thread}")
    tab_to(page, "payout: approve-payout")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name=f"Run {run['id']}")).to_be_focused()
    tab_to(page, "Approved")
    page.keyboard.press("Space")
    tab_to(page, "Priority")
    for _ in range(3):  # Choose…, low, normal, high
        page.keyboard.press("ArrowDown")
    tab_to(page, "Amount")
    page.keyboard.type("40")
    tab_to(page, "Note")
    page.keyboard.type("by keyboard")
    tab_to(page, "Name")
    page.keyboard.type("Grace")
    page.keyboard.press("Enter")  # submits the form
    expect(page.locator("dl.facts")).to_contain_text("completed")
    assert get_run(server, run["id"])["output"] == "paid 40 to Grace (high, by keyboard)"


def test_the_runs_are_filtered_by_status_agent_and_thread(server: Server, page: Page) -> None:
    from playwright.sync_api import expect

    a, b = new_thread(), new_thread()
    start(server, "refund", {"order_id": "o-2"}, thread_id=a)
    start(server, "payout", "invoice 9", thread_id=b)
    start(server, "chatty", 1, thread_id=b)
    page.goto(f"{server.url}/ui/#/?thread_id={b}")
    runs = page.get_by_role("list", name="Runs").get_by_role("listitem")
    expect(runs).to_have_count(2)

    page.get_by_label("Agent").select_option("payout")
    page.get_by_role("button", name="Filter").click()  # within the thread typed in the form
    expect(runs).to_have_count(1)
    expect(runs.first).to_contain_text("payout: approve-payout")

    page.get_by_label("Agent").select_option("")
    page.get_by_label("Status").select_option("completed")
    page.get_by_role("button", name="Filter").click()
    expect(runs).to_have_count(1)
    expect(runs.first).to_contain_text("chatty")

    page.goto(f"{server.url}/ui/#/?thread_id={a}")
    expect(runs).to_have_count(1)
    expect(runs.first).to_contain_text("refund")


def test_a_run_is_cancelled_then_deleted_from_its_page(server: Server, page: Page) -> None:
    from playwright.sync_api import expect

    run = start(server, "refund", {"order_id": "o-3"})
    page.goto(f"{server.url}/ui/#/runs/{run['id']}")
    page.get_by_role("button", name="Cancel run").click()
    expect(page.locator("dl.facts")).to_contain_text("cancelled")
    assert get_run(server, run["id"])["status"] == "cancelled"
    page.get_by_role("button", name="Delete run").click()
    expect(page.get_by_role("heading", name="Runs")).to_be_focused()
    assert fetch.get(f"{server.url}/runs/{run['id']}").status_code == 404


def test_on_a_phone_the_inbox_fits_the_screen(server: Server, browser: Browser) -> None:
    from playwright.sync_api import expect

    run = start(server, "payout", "a long request that must wrap on a small screen " * 3)
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        phone = context.new_page()
        for path in ("/ui/", f"/ui/#/runs/{run['id']}"):
            phone.goto(server.url + path)
            expect(phone.get_by_role("heading", level=1)).to_be_focused()
            expect(phone.get_by_role("main").locator("li, form").first).to_be_visible()
            width = phone.evaluate("() => [window.innerWidth, document.documentElement.scrollWidth]")
            assert width == [390, 390], path  # laid out at the phone's width, nothing wider
    finally:
        context.close()


def test_an_app_mounts_the_inbox_apart_from_the_api(tmp_path: Path, page: Page) -> None:
    from playwright.sync_api import expect

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TEST_STORE": f"sqlite:///{tmp_path / 'apart.db'}"}
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "tests.support.inbox_apart:app",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    served = subprocess.Popen(command, env=env)
    try:
        wait_until_up(f"{url}/api/ai")
        run = fetch.post(f"{url}/api/ai/agents/refund/runs?wait=1", json={"input": {"order_id": "o-4"}}).json()
        page.goto(f"{url}/agents")  # redirected to /agents/, so the page's own files resolve
        page.get_by_role("link", name="refund: approve-refund").click()
        page.get_by_label("Approved").check()
        page.get_by_role("button", name="Send answer").click()
        expect(page.get_by_role("list", name="Events")).to_contain_text("RUN_FINISHED")
        assert fetch.get(f"{url}/api/ai/runs/{run['id']}").json()["output"] == "refunded"
    finally:
        page.close()
        served.terminate()
        served.wait(timeout=20)


# -- without a browser ---------------------------------------------------------------------------


def test_the_inbox_is_served_only_when_the_app_turns_it_on() -> None:
    from ..support.inbox_agents import AGENTS

    assert TestClient(create_agent_unit(AGENTS, store="memory://")).get("/ui/").status_code == 404
    client = TestClient(create_agent_unit(AGENTS, store="memory://", ui=True, base_path="/api"))
    page = client.get("/api/ui/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]  # nothing from elsewhere
    for name in ("app.js", "app.css"):
        assert client.get(f"/api/ui/{name}").status_code == 200
    redirect = client.get("/api/ui", follow_redirects=False)
    assert redirect.status_code == 308 and redirect.headers["location"] == "/api/ui/"
    missing_file = client.get("/api/ui/secrets.txt")
    assert missing_file.status_code == 404 and missing_file.json()["error"]["code"] == "not_found"


def test_the_inbox_is_behind_authorize() -> None:
    from ..support.inbox_agents import AGENTS

    asked: list[str] = []

    def authorize(request: Request, action: str, run: dict[str, Any]) -> bool:
        asked.append(action)
        return request.headers.get("authorization") == "Bearer ok"

    client = TestClient(create_agent_unit(AGENTS, store="memory://", ui=True, authorize=authorize))
    refused = client.get("/ui/app.js")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    assert client.get("/ui/", headers={"authorization": "Bearer ok"}).status_code == 200
    assert asked == ["ui", "ui"]

    inbox = TestClient(create_inbox("/api/ai", authorize=authorize))
    assert inbox.get("/app.js").json()["error"]["code"] == "forbidden"
    index = inbox.get("/", headers={"authorization": "Bearer ok"})
    assert '<meta name="agent-unit-api" content="/api/ai/">' in index.text
    assert inbox.get("/nothing.js", headers={"authorization": "Bearer ok"}).json()["error"]["code"] == "not_found"
    assert asked == ["ui", "ui", "ui", "ui", "ui"]


def test_dev_serves_the_inbox_and_prints_its_url(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / "project_ok", project)
    (project / "agent-unit.toml").write_text('base_path = "/api"\n')
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "agent_unit_cli",
        "dev",
        "--root",
        str(project),
        "--port",
        str(port),
        "--no-reload",
    ]
    dev = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/api")
        inbox = fetch.get(f"http://127.0.0.1:{port}/api/ui/")
        assert inbox.status_code == 200 and "app.js" in inbox.text
    finally:
        dev.terminate()
        out, _ = dev.communicate(timeout=20)
    assert f"inbox: http://127.0.0.1:{port}/api/ui/" in out


def test_a_build_serves_the_inbox_only_when_the_config_turns_it_on(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / "project_ok", project)
    for config, status in (("", 404), ("ui = true\n", 200)):
        (project / "agent-unit.toml").write_text(config)
        built = CliRunner().invoke(cli, ["build", "--root", str(project), "--json"])
        assert built.exit_code == 0, built.output
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-I", "main.py"],
            cwd=json.loads(built.output)["output"],
            env={**os.environ, "PORT": str(port), "HOST": "127.0.0.1"},
        )
        try:
            wait_until_up(f"http://127.0.0.1:{port}")
            assert fetch.get(f"http://127.0.0.1:{port}/ui/").status_code == status, config
        finally:
            server.terminate()
            server.wait(timeout=20)


def test_the_config_turns_the_inbox_on_for_builds_and_leaves_it_off_by_default(tmp_path: Path) -> None:
    assert load_config(tmp_path)[0].ui is False
    (tmp_path / "agent-unit.toml").write_text("ui = true\n")
    assert load_config(tmp_path)[0].ui is True
    (tmp_path / "agent-unit.toml").write_text('ui = "sometimes"\n')
    with pytest.raises(ConfigError, match=r"agent-unit\.toml: ui:"):
        load_config(tmp_path)


def test_more_runs_are_listed_page_by_page_and_the_focus_stays_in_the_list(server: Server, page: Page) -> None:
    from playwright.sync_api import expect

    thread = new_thread()
    for _ in range(52):  # the API's default page is 50 runs
        start(server, "chatty", 0, thread_id=thread)
    page.goto(f"{server.url}/ui/#/?thread_id={thread}")
    runs = page.get_by_role("list", name="Runs").get_by_role("listitem")
    expect(runs).to_have_count(50)
    page.get_by_role("button", name="More runs").click()
    expect(runs).to_have_count(52)
    expect(runs.nth(50).get_by_role("link")).to_be_focused()
    expect(page.get_by_role("button", name="More runs")).to_have_count(0)


def test_a_finished_run_page_shows_what_it_returned_or_why_it_failed(server: Server, page: Page) -> None:
    from playwright.sync_api import expect

    done = start(server, "quote", "o-9")
    failed = start(server, "declined", "o-10")
    assert (done["status"], failed["status"]) == ("completed", "failed")

    page.goto(f"{server.url}/ui/#/runs/{done['id']}")
    expect(page.get_by_role("heading", name="Output")).to_be_visible()
    raw = page.locator(".output pre.raw").text_content() or ""
    assert json.loads(raw) == {"order": "o-9", "total": 42.5, "lines": ["widget", "gadget"]}
    assert "[object" not in page.locator("main").inner_text()

    page.goto(f"{server.url}/ui/#/runs/{failed['id']}")
    expect(page.get_by_role("heading", name="Error")).to_be_visible()
    why = "CardDeclined: the card ending 4242 was declined (in step charge)"
    expect(page.get_by_role("alert")).to_contain_text(why)
    assert "[object" not in page.locator("main").inner_text()


def test_the_focused_page_heading_has_no_text_field_outline(server: Server, page: Page) -> None:
    from playwright.sync_api import expect

    page.goto(f"{server.url}/ui/")
    heading = page.get_by_role("heading", level=1)
    expect(heading).to_be_focused()
    assert heading.evaluate("e => getComputedStyle(e).outlineStyle") == "none"
