"""Every event the runtime stores is a valid AG-UI event (checked with the ag-ui-protocol models)."""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import Event
from pydantic import TypeAdapter

from agent_unit import Run, define_agent
from agent_unit.testing import create_test_unit

AGUI = TypeAdapter(Event)
OURS = {"RUN_INTERRUPTED", "RUN_SLEEPING", "RUN_CANCELLED"}


@define_agent
async def everything(input: str, run: Run) -> dict[str, Any]:
    await run.step("load", lambda: {"id": 1})
    await run.emit("progress", {"pct": 50})
    if input == "fail":
        raise ValueError("boom")
    await run.interrupt("approve", {"id": 1}, answer=bool)
    await run.sleep("1m")
    return {"ok": True}


async def test_stored_events_validate_as_ag_ui() -> None:
    unit = create_test_unit({"a": everything})
    ok = await unit.run("a", "ok")
    await unit.resume(ok.id, True)
    await unit.advance("2m")
    failed = await unit.run("a", "fail")
    cancelled = await unit.run("a", "ok")
    await unit.cancel(cancelled.id)
    seen = set()
    for run_id in (ok.id, failed.id, cancelled.id):
        for event in await unit.events(run_id):
            event.pop("seq")
            seen.add(event["type"])
            if event["type"] in OURS:
                assert event["runId"] == run_id and isinstance(event["timestamp"], int)
                continue
            parsed = AGUI.validate_python(event)
            assert json.loads(parsed.model_dump_json(by_alias=True, exclude_none=True)) == event
    assert seen == {"RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "CUSTOM", "RUN_FINISHED", "RUN_ERROR", *OURS}


def test_step_events_are_written_as_the_json_encoder_writes_them() -> None:
    """Step events take a template (two per step); any other shape of the same keys goes to the encoder."""
    from ag_ui.core import EventType

    from agent_unit._events import dumps

    encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
    for event in (
        {"type": "STEP_STARTED", "stepName": "load", "timestamp": 1},
        {"type": "STEP_FINISHED", "stepName": 'é"\\\n\x01', "timestamp": 179},
        {"type": EventType.STEP_STARTED, "stepName": "x", "timestamp": 5},  # an AG-UI model dumped as is
        {"type": "STEP_STARTED", "timestamp": 5, "stepName": "x"},  # another key order
        {"type": ["STEP_STARTED"], "stepName": "x", "timestamp": 5},
        {"type": "STEP_STARTED", "stepName": "x", "timestamp": True},
    ):
        assert dumps(event) == encoder.encode(event)
    assert dumps({"type": "STEP_STARTED", "stepName": "\ud800", "timestamp": 1}) == (
        '{"type":"STEP_STARTED","stepName":"\ufffd","timestamp":1}'
    )
