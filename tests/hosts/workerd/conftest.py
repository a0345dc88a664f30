"""Each module builds one project with the cloudflare preset and serves it with one ``wrangler dev``."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_unit_cli.build import build
from agent_unit_cli.config import load_config

from .dev import WranglerDev
from .ledger import Ledger
from .runtime import toolchain

PROJECTS = Path(__file__).parent / "projects"


def serve(project: str, work: Path, dev_vars: dict[str, str] | None = None) -> WranglerDev:
    """Build ``projects/<project>`` in ``work`` and start ``wrangler dev`` over it."""
    tools = toolchain()
    root = work / "project"
    shutil.copytree(PROJECTS / project, root)
    config, _ = load_config(root)
    build(root, config, preset="cloudflare")
    dev = WranglerDev(tools, root / ".output" / "cloudflare", work, dev_vars or {})
    dev.start()
    return dev


@pytest.fixture(scope="module")
def ledger() -> Iterator[Ledger]:
    found = Ledger().start()
    yield found
    found.stop()


def eventually(check: object, seconds: float = 30) -> None:
    """Wait until ``check()`` is true (an alarm or waitUntil work finishing after the response)."""
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"still not true after {seconds}s")
        time.sleep(0.2)
