"""A built server with no configured ``url`` serves its A2A card at the address it listens on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..support import fetch
from ..support.server import ROOT, free_port, wait_until_up

pytestmark = pytest.mark.slow  # builds a preset's output and starts it in a subprocess: left out of `make check`


AGENT = "from agent_unit import define_agent\n\n@define_agent\nasync def agent(input: dict) -> str:\n    return 'ok'\n"
FAILING = (
    "from agent_unit import define_agent\n\n\ndef charge():\n    raise RuntimeError('declined')\n\n\n"
    "@define_agent\nasync def agent(input: dict) -> str:\n    charge()\n"
)


def test_a_built_server_without_url_serves_the_card_at_its_listen_address_and_logs_failed_runs(
    tmp_path: Path,
) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "refund.py").write_text(AGENT)
    (tmp_path / "agents" / "billing.py").write_text(FAILING)
    env = {key: value for key, value in os.environ.items() if key != "AGENT_UNIT_URL"}
    built = subprocess.run(
        [sys.executable, "-m", "agent_unit_cli", "build", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(ROOT)},
    )
    assert built.returncode == 0, built.stderr
    port = free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, str(tmp_path / ".output" / "server" / "main.py")],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**env, "PORT": str(port), "AGENT_UNIT_SECRET": "s"},
            cwd=tmp_path,
        )
    try:
        wait_until_up(f"http://127.0.0.1:{port}")
        # the card's URL is the listen address, never the Host (an address is never a rebinding)
        card = fetch.get(f"http://127.0.0.1:{port}/.well-known/agent-card.json", headers={"host": "10.0.0.7"})
        assert card.status_code == 200 and card.json()["url"] == f"http://localhost:{port}/a2a"
        # on all interfaces, reached over loopback: a rebinding name is refused on every route
        for path in ["/.well-known/agent-card.json", "/runs", "/agents"]:
            foreign = fetch.get(f"http://127.0.0.1:{port}{path}", headers={"host": f"evil.example:{port}"})
            assert foreign.status_code == 421 and foreign.json()["error"]["code"] == "forbidden_host", path
        failed = fetch.post(f"http://127.0.0.1:{port}/agents/billing/runs?wait=1", json={"input": {}}).json()
        assert failed["status"] == "failed"
    finally:
        server.terminate()
        server.wait(timeout=30)
    output = log.read_text()
    assert output.count("`url` is not set") == 1, output
    assert "(it listens on all interfaces)" in output
    assert f"run {failed['id']} of agent 'billing' failed" in output  # the server's log has the user's traceback
    assert 'agents/billing.py", line 5, in charge' in output and "RuntimeError: declined" in output
    assert '"POST /agents/billing/runs?wait=1 HTTP/1.1" 200' in output  # LOG_LEVEL's default (info) logs requests
