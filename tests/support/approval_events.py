"""What every adapter's approval shows on the event stream: the call, before the run parks, once."""

from __future__ import annotations

import json
from typing import Any


def assert_the_call_is_shown_before_the_park_and_once(
    events: list[dict[str, Any]], *, call_id: str, tool: str, arguments: dict[str, Any], approved: bool = True
) -> None:
    """``events``: a run that parked at the approval of ``call_id``, then was answered and finished."""
    parked = next(index for index, event in enumerate(events) if event["type"] == "RUN_INTERRUPTED")
    assert events[parked]["interrupt"]["payload"]["call_id"] == call_id
    start, args, end = events[parked - 3 : parked]  # right before the park: a UI knows the call it approves
    assert start == {**start, "type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": tool}
    assert args["type"] == "TOOL_CALL_ARGS" and args["toolCallId"] == call_id
    assert json.loads(args["delta"]) == arguments
    assert end["type"] == "TOOL_CALL_END" and end["toolCallId"] == call_id
    after = [event for event in events[parked + 1 :] if event.get("toolCallId") == call_id]
    # Once answered, the call adds only its result (none when declined): it is never shown twice.
    assert [event["type"] for event in after] == (["TOOL_CALL_RESULT"] if approved else [])
