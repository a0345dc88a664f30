"""Retake the inbox screenshots in docs/: the run list, and a run's timeline (light and dark).

    python scripts/inbox_screenshots.py

Starts a server on a free port with a fresh store in a temporary directory, runs the test
agents (tests/inbox_agents.py) through a retried step, a sleep, an answered question, a
PydanticAI model and tool call and a failure, then photographs the pages in headless
Chromium (Playwright for Python; the system's ``chromium``). Nothing is fetched from elsewhere.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

import httpx
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.server import Server  # noqa: E402  (the repository's test server, on a free port)

DOCS = ROOT / "docs"


def start(server: Server, agent: str, input: Any, thread_id: str = "demo") -> dict[str, Any]:
    body = {"input": input, "thread_id": thread_id}
    response = httpx.post(f"{server.url}/agents/{agent}/runs?wait=1", json=body, timeout=60)
    response.raise_for_status()
    return response.json()  # type: ignore[no-any-return]


def wait_for(server: Server, run_id: str, status: str) -> None:
    deadline = time.monotonic() + 30
    while httpx.get(f"{server.url}/runs/{run_id}", timeout=10).json()["status"] != status:
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} never became {status}")
        time.sleep(0.1)


def main() -> None:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as folder:
        server = Server(
            f"sqlite:///{Path(folder) / 'demo.db'}",
            env={"TEST_AGENTS": "tests.support.inbox_agents:AGENTS", "TEST_OPTIONS": json.dumps({"ui": True})},
        ).start()
        try:
            start(server, "quote", "o-41")
            start(server, "broken", "o-42")
            start(server, "shopper", "what does a pear cost?")
            start(server, "napper", "weekly report")
            journey = start(server, "journey", "o-43")
            wait_for(server, journey["id"], "interrupted")
            httpx.post(f"{server.url}/runs/{journey['id']}/resume", json={"answer": True}, timeout=30)
            wait_for(server, journey["id"], "completed")
            start(server, "refund", {"order_id": "o-44"})
            start(server, "payout", "invoice 45")
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
                schemes: tuple[tuple[Literal["light", "dark"], str], ...] = (("light", ""), ("dark", "-dark"))
                for scheme, suffix in schemes:
                    page = browser.new_page(viewport={"width": 1000, "height": 760}, color_scheme=scheme)
                    page.goto(f"{server.url}/ui/")
                    page.get_by_role("list", name="Runs").get_by_role("listitem").nth(6).wait_for()
                    if not suffix:
                        page.screenshot(path=str(DOCS / "inbox-list.png"), full_page=True)
                    page.goto(f"{server.url}/ui/#/runs/{journey['id']}")
                    step = page.locator(".tl-row.step").first
                    step.get_by_role("button").click()
                    page.get_by_text("Attempt 2 failed").wait_for()
                    page.mouse.move(0, 0)  # no hover outline in the picture
                    page.locator("section").filter(has=page.get_by_role("heading", name="Timeline")).screenshot(
                        path=str(DOCS / f"inbox-timeline{suffix}.png")
                    )
                    page.close()
                browser.close()
        finally:
            server.stop()
    for name in ("inbox-list.png", "inbox-timeline.png", "inbox-timeline-dark.png"):
        print(DOCS / name)


if __name__ == "__main__":
    main()
