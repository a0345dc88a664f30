"""Your own ASGI app (``server = "app:app"``) on the cloudflare preset, in real workerd (``wrangler dev``),
behind agent-unit's Origin check."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ...support import fetch
from .conftest import eventually, served
from .dev import WranglerDev
from .ledger import Ledger

# one `wrangler dev` for the module: `make test` keeps a module in one worker process (`--dist loadscope`)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory, ledger: Ledger) -> Iterator[WranglerDev]:
    with served("app", tmp_path_factory, {"LEDGER_URL": ledger.url, "API_TOKEN": "tok-123"}) as dev:
        yield dev


def test_wait_until_work_finishes_after_the_response_with_no_uncaught_error(
    worker: WranglerDev, ledger: Ledger
) -> None:
    response = fetch.post(worker.url + "/later", timeout=60)
    assert response.json() == {"accepted": True}
    assert ledger.made("/later") == []  # the work sleeps past the response
    eventually(lambda: len(ledger.made("/later")) == 1)
    assert "Uncaught" not in worker.log, worker.log[-3000:]


def test_agent_unit_env_reads_a_wrangler_var_and_a_dev_vars_secret(worker: WranglerDev) -> None:
    body = fetch.get(worker.url + "/settings", timeout=60).json()
    assert body == {"greeting": "hello from wrangler.jsonc", "token": "tok-123", "missing": False}


def test_a_foreign_pages_post_is_refused_before_your_app_sees_it(worker: WranglerDev, ledger: Ledger) -> None:
    """Workers route by Host (any Host is the Worker's own), but the Origin check stands in front of your app."""
    before = len(ledger.made("/later"))
    refused = fetch.post(worker.url + "/later", headers={"origin": "https://evil.example"}, timeout=60)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden_origin", refused.text
    own = fetch.post(worker.url + "/later", headers={"origin": worker.url}, timeout=60)  # a page it serves itself
    assert own.json() == {"accepted": True}
    eventually(lambda: len(ledger.made("/later")) == before + 1)
