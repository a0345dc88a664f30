"""A Worker written by hand with ``create_worker`` (the README's example), in real workerd."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import agent_unit

from ...support import fetch
from .conftest import PROJECTS
from .dev import WranglerDev
from .runtime import toolchain

# one `wrangler dev` for the module: `make test` keeps a module in one worker process (`--dist loadscope`)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WranglerDev]:
    tools = toolchain()
    work = tmp_path_factory.mktemp("handwritten")
    project = work / "project"
    shutil.copytree(PROJECTS / "handwritten", project)
    shutil.copytree(Path(agent_unit.__file__).parent, project / "src" / "agent_unit")  # the runtime, beside the entry
    dev = WranglerDev(tools, project, work, {})
    dev.start()
    yield dev
    dev.stop()


def test_a_hand_written_worker_runs_the_refund_flow_on_durable_objects(worker: WranglerDev) -> None:
    with fetch.Client(base_url=worker.url, timeout=120) as http:
        started = http.post("/agents/refund/runs?wait=1", json={"input": {"order_id": "h1"}}).json()
        assert started["status"] == "interrupted", started
        done = http.post(f"/runs/{started['id']}/resume?wait=1", json={"answer": {"approved": True}}).json()
        assert (done["status"], done["output"]) == ("completed", "refunded"), done
        assert [run["id"] for run in http.get("/runs").json()["runs"]] == [started["id"]]
    assert "Uncaught" not in worker.log, worker.log[-3000:]
