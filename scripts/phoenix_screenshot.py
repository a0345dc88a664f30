"""Retake docs/phoenix-trace.png: a run's trace in Arize Phoenix, for the README's "Observability".

    make observability        # or: python scripts/phoenix_screenshot.py

Starts Phoenix offline on a free loopback port (from ``.venv-phoenix``: ``make
.venv-phoenix/.installed``), runs a PydanticAI agent that looks an order up, asks for approval
to refund it and parks; a second process approves it and the run ends. Both processes send their
spans to Phoenix over OTLP/HTTP, configured only by the standard ``OTEL_*`` variables. Then it
photographs the trace's page in headless Chromium (Playwright for Python; the system's ``chromium``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.phoenix import Phoenix, phoenix_bin  # noqa: E402  (Phoenix on a free port)

OUTPUT = ROOT / "docs" / "phoenix-trace.png"


def run(phoenix: Phoenix, *args: str) -> str:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.update(
        PYTHONPATH=str(ROOT),
        OTEL_EXPORTER_OTLP_ENDPOINT=phoenix.url,
        OTEL_SERVICE_NAME="refunds",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
    )
    command = [sys.executable, "-m", "tests.support.phoenix_run", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout.strip()


def main() -> None:
    executable = phoenix_bin()
    if executable is None:
        sys.exit("Phoenix is not installed: run `make .venv-phoenix/.installed` first")
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as folder, Phoenix(Path(folder), executable) as phoenix:
        db = Path(folder) / "runs.db"
        run_id = run(phoenix, "start", str(db))
        run(phoenix, "resume", str(db), run_id)
        deadline = time.monotonic() + 30
        while not (root := [s for s in phoenix.spans() if s["name"] == "run support"]):
            if time.monotonic() > deadline:
                sys.exit("Phoenix never showed the run's span")
            time.sleep(0.5)
        trace_id = root[0]["context"]["trace_id"]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 1040})
            page.goto(f"{phoenix.url}/projects/UHJvamVjdDox/traces/{trace_id}")
            page.get_by_text("resume support").first.wait_for(timeout=60_000)
            page.wait_for_timeout(1500)
            page.screenshot(path=str(OUTPUT))
            browser.close()
    print(OUTPUT)


if __name__ == "__main__":
    main()
