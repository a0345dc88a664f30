"""The refund example, end to end over HTTP: build, serve, pause, restart, resume.

    python examples/refund/main.py

1. `agent-unit build` turns agents/ into .output/server/ (the server preset).
2. The built server starts, and a run is started over HTTP; its events stream to the terminal
   until it parks for approval.
3. The server is stopped and started again (a deploy, a crash, a scale-down).
4. The run is resumed over HTTP and finishes; the ledger shows each effect ran exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_unit.client import RunEvent

HERE = Path(__file__).resolve().parent
STATE = HERE / ".agent-unit"
LEDGER = STATE / "ledger.jsonl"


def say(message: str) -> None:
    print(f"\033[1m==> {message}\033[0m", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int) -> subprocess.Popen[bytes]:
    environment = {
        **os.environ,
        "PORT": str(port),
        "HOST": "127.0.0.1",
        "LOG_LEVEL": "warning",
        "REFUND_LEDGER": str(LEDGER),
        "AGENT_UNIT_STORAGE": f"sqlite:///{STATE / 'agent-unit.db'}",
    }
    server = subprocess.Popen([sys.executable, str(HERE / ".output" / "server" / "main.py")], env=environment)
    import httpx

    deadline = time.monotonic() + 30
    with httpx.Client(timeout=1) as http:
        while time.monotonic() < deadline:
            try:
                http.get(f"http://127.0.0.1:{port}/agents")
                return server
            except httpx.HTTPError:
                time.sleep(0.1)
    server.kill()
    raise SystemExit("error: the built server did not start")


def stop_server(server: subprocess.Popen[bytes]) -> None:
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=30)


def show(event: RunEvent) -> None:
    details = {key: value for key, value in event.data.items() if key not in ("type", "threadId", "runId", "timestamp")}
    print(f"  {event.seq:>3}  {event.type:<16} {json.dumps(details)[:100] if details else ''}", flush=True)


def main() -> int:
    from agent_unit.client import SyncAgentClient

    for stale in (STATE / "agent-unit.db", STATE / "agent-unit.db-wal", STATE / "agent-unit.db-shm", LEDGER):
        stale.unlink(missing_ok=True)
    STATE.mkdir(exist_ok=True)

    say("agent-unit build --preset server")
    agent_unit = [sys.executable, "-m", "agent_unit_cli", "build", "--root", str(HERE), "--preset", "server"]
    subprocess.run(agent_unit, check=True)

    port = free_port()
    say(f"python .output/server/main.py  (port {port})")
    server = start_server(port)
    with SyncAgentClient(f"http://127.0.0.1:{port}") as agents:
        say("POST /agents/refund/runs  (streaming)")
        run_id = ""
        for event in agents.run("refund", {"order_id": "o_1"}):
            show(event)
            run_id = run_id or str(event.data["runId"])  # RUN_STARTED names the run

    say("stopping the server, starting it again")
    stop_server(server)
    server = start_server(port)
    try:
        with SyncAgentClient(f"http://127.0.0.1:{port}") as agents:
            print(f"  run {run_id} is {agents.get(run_id).status.value} after the restart")
            say(f"POST /runs/{run_id}/resume  {{'answer': {{'approved': true}}}}")
            for event in agents.resume(run_id, {"approved": True, "note": "customer is right"}):
                show(event)
            record = agents.get(run_id)
    finally:
        stop_server(server)

    calls = [json.loads(line)["call"] for line in LEDGER.read_text().splitlines()]
    print(f"run {run_id}: {record.status.value}, output {record.output!r}")
    print(f"ledger: load_order ran {calls.count('load_order')}x, refund ran {calls.count('refund')}x")
    if record.output != "refunded" or calls.count("refund") != 1 or calls.count("load_order") != 1:
        print("error: the run did not finish with each effect exactly once", file=sys.stderr)
        return 1
    print("ok: built, paused, restarted the server, resumed; every effect ran exactly once")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
