"""Each module builds one project with the cloudflare preset and serves it with one ``wrangler dev``.

The D1 and Durable Objects projects share the refund and sleeper agents and the Worker's calls to
the ledger (tests/support/fixtures/workerd_refund); each adds the agents of its own.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agent_unit_cli.build import build
from agent_unit_cli.config import load_config

from .dev import WranglerDev
from .ledger import Ledger
from .runtime import toolchain

PROJECTS = Path(__file__).parent / "projects"
REFUND = Path(__file__).parents[2] / "support" / "fixtures" / "workerd_refund"


def serve(project: str, work: Path, dev_vars: dict[str, str] | None = None, *, refund: bool = False) -> WranglerDev:
    """Build ``projects/<project>`` (over the shared refund agents if ``refund``) in ``work`` and
    start ``wrangler dev`` over it."""
    tools = toolchain()
    root = work / "project"
    if refund:
        shutil.copytree(REFUND, root)
    shutil.copytree(PROJECTS / project, root, dirs_exist_ok=True)
    config, _ = load_config(root)
    build(root, config, preset="cloudflare")
    dev = WranglerDev(tools, root / ".output" / "cloudflare", work, dev_vars or {})
    dev.start()
    return dev


@contextmanager
def served(
    project: str, tmp_path_factory: pytest.TempPathFactory, dev_vars: dict[str, str], *, refund: bool = False
) -> Iterator[WranglerDev]:
    """A module's ``wrangler dev`` over ``projects/<project>``, stopped when the module is done."""
    dev = serve(project, tmp_path_factory.mktemp(project), dev_vars, refund=refund)
    try:
        yield dev
    finally:
        dev.stop()


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
