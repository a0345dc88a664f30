"""Operating runs from the approvals inbox, in a real headless Chromium: the page shows who answered
an interrupt and when, and retries a failed run from its failed step."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from ..support import fetch
from ..support.server import Server
from .test_inbox import browser, get_run, page, start  # noqa: F401 - the inbox tests' Chromium fixtures

# Playwright is imported where a page is checked, not here: every pytest worker paid for it to
# collect this module.
if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.slow  # drives a real Chromium: left out of `make check`


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    options = {"ui": True, "authorize": "tests.support.inbox_agents:as_reviewer", "require_answerer": True}
    served = Server(
        f"sqlite:///{tmp_path_factory.mktemp('inbox-ops') / 'inbox.db'}",
        env={"TEST_AGENTS": "tests.support.inbox_agents:AGENTS", "TEST_OPTIONS": json.dumps(options)},
    ).start()
    yield served
    served.stop()


def test_the_run_page_shows_who_answered_and_when(server: Server, page: Page) -> None:  # noqa: F811
    from playwright.sync_api import expect

    run = start(server, "refund", {"order_id": "o-ops"})
    page.goto(f"{server.url}/ui/#/runs/{run['id']}")
    page.get_by_label("Approved").check()
    page.get_by_role("button", name="Send answer").click()
    facts = page.locator("dl.facts")
    expect(facts).to_contain_text("completed")
    expect(facts).to_contain_text("Answered approve-refund")
    expect(facts).to_contain_text("reviewer@example.com")  # who the deployment's authorize named
    answer = get_run(server, run["id"])["answers"][0]
    assert answer["by"] == "reviewer@example.com" and answer["expired"] is False


def test_a_failed_run_is_retried_from_its_failed_step_with_the_button(server: Server, page: Page) -> None:  # noqa: F811
    from playwright.sync_api import expect

    run = start(server, "transient", "x")
    assert run["status"] == "failed" and run["error"]["step"] == "fetch"
    page.goto(f"{server.url}/ui/#/runs/{run['id']}")
    expect(page.get_by_role("alert")).to_contain_text("ConnectionError")
    page.get_by_role("button", name="Retry from the failed step").click()
    facts = page.locator("dl.facts")
    expect(facts).to_contain_text("completed")
    expect(facts).to_contain_text("Retried")
    expect(page.get_by_role("button", name="Retry from the failed step")).to_have_count(0)
    done = get_run(server, run["id"])
    assert done["output"] == "fetched" and done["attempt"] == 2
    retried = fetch.get(f"{server.url}/runs/{run['id']}/events", timeout=10).text
    assert retried.count('"stepName":"prepare"') == 2  # STEP_STARTED and STEP_FINISHED once: not run again
