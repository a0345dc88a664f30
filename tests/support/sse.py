"""The events of an SSE body as the tests read them."""

from __future__ import annotations

import json
from typing import Any


def sse(text: str) -> list[dict[str, Any]]:
    """The events of an SSE body, each with its seq (the SSE id)."""
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
        if "data" in fields:
            events.append({"seq": int(fields["id"]), **json.loads(fields["data"])})
    return events
