"""Take a refund through a pause, a restart and a resume on the embedded SQLite store.

    python examples/refund/main.py

Process 1 starts the run, which parks at the approval. Process 2 (a fresh interpreter, as
after a restart or a deploy) answers it and the run finishes. The ledger shows every
effect ran exactly once.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATE = HERE / ".agent-unit"
STORE = f"sqlite:///{STATE / 'agent-unit.db'}"
sys.path.insert(0, str(HERE))


async def start() -> None:
    from agent_unit import RunEngine
    from agent_unit.discovery import discover_agents

    engine = RunEngine(discover_agents(HERE), STORE)
    record = await engine.start("refund", {"order_id": "o_1"}, wait=True)
    print(f"[process 1] run {record.id} is {record.status.value}: {record.interrupt.name if record.interrupt else ''}")
    print(f"[process 1] payload: {json.dumps(record.interrupt.payload if record.interrupt else None)}")
    print(f"[process 1] answer schema: {json.dumps(record.interrupt.answer_schema if record.interrupt else None)}")
    (STATE / "run-id").write_text(record.id)
    await engine.aclose()


async def resume() -> None:
    from agent_unit import InvalidAnswer, RunEngine
    from agent_unit.discovery import discover_agents

    engine = RunEngine(discover_agents(HERE), STORE)
    run_id = (STATE / "run-id").read_text()
    try:
        await engine.resume(run_id, {"approved": "yes please"})
    except InvalidAnswer as exc:
        print(f"[process 2] a wrong answer is refused, the run stays parked: {exc.message}")
    record = await engine.resume(run_id, {"approved": True, "note": "customer is right"}, wait=True)
    print(f"[process 2] run {record.id} is {record.status.value}: output {record.output!r}")
    events = await engine.events(run_id)
    print(f"[process 2] {len(events)} events: " + " ".join(json.loads(event.data)["type"] for event in events))
    await engine.aclose()


def main() -> int:
    if len(sys.argv) > 1:
        asyncio.run({"start": start, "resume": resume}[sys.argv[1]]())
        return 0
    for stale in (
        STATE / "agent-unit.db",
        STATE / "agent-unit.db-wal",
        STATE / "agent-unit.db-shm",
        STATE / "ledger.jsonl",
    ):
        stale.unlink(missing_ok=True)
    STATE.mkdir(exist_ok=True)
    environment = {"REFUND_LEDGER": str(STATE / "ledger.jsonl")}
    for phase in ("start", "resume"):
        subprocess.run([sys.executable, __file__, phase], check=True, env={**os.environ, **environment})
    ledger = [json.loads(line) for line in (STATE / "ledger.jsonl").read_text().splitlines()]
    counts = {call: sum(1 for entry in ledger if entry["call"] == call) for call in ("load_order", "refund")}
    print(f"ledger: load_order ran {counts['load_order']}x, refund ran {counts['refund']}x")
    if counts != {"load_order": 1, "refund": 1}:
        print("error: an effect ran more than once", file=sys.stderr)
        return 1
    print("ok: paused, restarted in a new process, resumed; every effect ran exactly once")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
