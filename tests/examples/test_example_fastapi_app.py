"""examples/fastapi-app, built for the server preset and driven in headless Chromium.

The build (``server = "shop.main:app"``) is moved elsewhere and served by ``python -I -S main.py``
as a host runs it. What ``test_inbox.py`` proves against the dev server (refused answers, the
keyboard, filters, a phone) is not repeated here: this proves the inbox inside a user's own app,
built: the shop's own pages beside it, a run approved across a restart of the built server, the
payout made once. ``AGENT_UNIT_SCREENSHOT=1`` retakes examples/fastapi-app/inbox.png.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..protocols.test_inbox import browser  # noqa: F401 - the shared headless Chromium (a fixture)
from ..support import fetch
from ..support.server import ROOT, free_port, wait_until_up

# Playwright is imported where a page is checked, not here: every pytest worker paid for it to
# collect this module.
if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.slow  # builds a preset's output and starts it in a subprocess: left out of `make check`


EXAMPLE = ROOT / "examples" / "fastapi-app"


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example built for the server preset from a copy (nothing written into the repository)."""
    root = tmp_path_factory.mktemp("fastapi-app") / "project"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".output", ".agent-unit", "__pycache__"))
    command = [sys.executable, "-m", "agent_unit_cli", "build", "--root", str(root), "--preset", "server", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["server"] == "shop.main:app"
    return root / ".output" / "server"


class Built:
    """The built server, moved elsewhere, run as a host runs it: ``python -I -S main.py``."""

    def __init__(self, folder: Path, state: Path) -> None:
        self.folder, self.port = folder, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            "PATH": os.environ["PATH"],
            "HOST": "127.0.0.1",
            "PORT": str(self.port),
            "LOG_LEVEL": "warning",
            "SHOP_STORAGE": f"sqlite:///{state / 'shop.db'}",
            "SHOP_LEDGER": str(state / "ledger.jsonl"),
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Built:
        self.process = subprocess.Popen([sys.executable, "-I", "-S", "main.py"], cwd=self.folder, env=self.env)
        wait_until_up(f"{self.url}/api/ai", timeout=120)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture
def shop(build: Path, tmp_path: Path) -> Iterator[Built]:
    moved = tmp_path / "elsewhere" / "server"
    shutil.copytree(build, moved)
    served = Built(moved, tmp_path).start()
    yield served
    served.stop()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:  # noqa: F811 - uses the imported fixture
    context = browser.new_context(viewport={"width": 1000, "height": 760})
    yield context.new_page()
    context.close()


def ask_refund(shop: Built, order_id: str) -> dict[str, Any]:
    body = {"input": {"order_id": order_id, "amount_cents": 4200}}
    response = fetch.post(f"{shop.url}/api/ai/agents/refund/runs?wait=1", json=body, timeout=60)
    response.raise_for_status()
    return response.json()  # type: ignore[no-any-return]


def test_the_built_app_serves_its_own_pages_the_agents_and_the_inbox_side_by_side(shop: Built, page: Page) -> None:
    from playwright.sync_api import expect

    page.goto(f"{shop.url}/")
    expect(page.get_by_role("heading", name="Shop", level=1)).to_be_visible()
    page.get_by_role("link", name="open the approvals inbox").click()
    expect(page.get_by_role("heading", name="Runs")).to_be_focused()
    assert page.url == f"{shop.url}/agents/"
    assert fetch.get(f"{shop.url}/api/ai/agents").json()["agents"][0]["name"] == "refund"
    assert fetch.get(f"{shop.url}/payouts").json() == []


def test_a_refund_paused_in_the_built_app_is_approved_in_its_inbox_across_a_restart(shop: Built, page: Page) -> None:
    from playwright.sync_api import expect

    paused = ask_refund(shop, "o-1")
    assert paused["status"] == "interrupted"

    page.goto(f"{shop.url}/agents/")
    runs = page.get_by_role("list", name="Runs").get_by_role("listitem")
    expect(runs).to_have_count(1)
    runs.first.get_by_role("link", name="refund: approve-refund").click()
    expect(page.get_by_role("heading", name=f"Run {paused['id']}")).to_be_focused()
    events = page.get_by_role("list", name="Events")
    expect(events).to_contain_text("RUN_INTERRUPTED")
    expect(page.get_by_text("Live.")).to_be_visible()
    expect(page.get_by_role("main")).to_contain_text('"amount_cents": 4200')

    shop.restart()  # a deploy between the pause and the approval, with the page open
    expect(page.get_by_text("Live.")).to_be_visible()  # the page's stream reconnected by itself

    page.get_by_label("Approved").check()
    page.get_by_label("Note").fill("customer is right")
    if os.environ.get("AGENT_UNIT_SCREENSHOT") == "1":
        page.screenshot(path=str(EXAMPLE / "inbox.png"), full_page=True)
    page.get_by_role("button", name="Send answer").click()
    expect(events).to_contain_text("RUN_FINISHED")  # the live view, reconnected to the restarted server
    expect(page.locator("dl.facts")).to_contain_text("completed")

    done = fetch.get(f"{shop.url}/api/ai/runs/{paused['id']}").json()
    assert done["status"] == "completed" and done["output"].startswith("refunded 42.00 as po_")
    payouts = fetch.get(f"{shop.url}/payouts").json()
    assert [line["order_id"] for line in payouts] == ["o-1"]  # paid once
