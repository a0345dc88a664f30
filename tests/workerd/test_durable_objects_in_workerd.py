"""The cloudflare preset's Durable Objects runtime in real workerd (``wrangler dev``), not a simulation."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from agent_unit.client import SyncAgentClient

from .conftest import serve
from .dev import WranglerDev
from .ledger import Ledger


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory, ledger: Ledger) -> Iterator[WranglerDev]:
    dev = serve("durable", tmp_path_factory.mktemp("durable"), {"LEDGER_URL": ledger.url})
    yield dev
    dev.stop()


def test_a_refund_parks_survives_a_restart_of_wrangler_dev_and_charges_exactly_once(
    worker: WranglerDev, ledger: Ledger
) -> None:
    with SyncAgentClient(worker.url, timeout=120) as client:
        events = list(client.run("refund", {"order_id": "o-1"}))
        assert events[-1].type == "RUN_INTERRUPTED", events
        run_id = events[-1].data["runId"]
    worker.restart()  # the same local state: the run's Durable Object outlives the process
    with SyncAgentClient(worker.url, timeout=120) as client:
        assert client.get(run_id).status == "interrupted"
        finished = list(client.resume(run_id, {"approved": True}))
        assert finished[-1].type == "RUN_FINISHED" and finished[-1].data["result"] == "refunded"
        assert client.get(run_id).status == "completed"
    charges = ledger.made("/charge")
    assert len(charges) == 1 and charges[0]["order_id"] == "o-1", ledger.calls
    with httpx.Client(base_url=worker.url, timeout=60) as http:
        again = http.post(f"/runs/{run_id}/resume", json={"answer": {"approved": True}})
        assert again.status_code == 409, again.text
    assert len(ledger.made("/charge")) == 1
    assert "Uncaught" not in worker.log, worker.log[-3000:]
