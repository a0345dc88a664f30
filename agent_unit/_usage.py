"""Token usage summed per (provider, model), as a run reports it.

Adapters record one entry per model call; a run's usage and its RUN_FINISHED event show the
totals, so the sum is kept in one place.
"""

from __future__ import annotations

from typing import Any

__all__ = ["COUNTS", "merge_usage"]

COUNTS = (  # the counts an entry may hold; other keys are left out of the sums
    "inputTokens",
    "outputTokens",
    "totalTokens",
    "reasoningTokens",
    "cachedInputTokens",
    "cacheWriteInputTokens",
)


def merge_usage(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sum usage entries per (provider, model)."""
    totals: dict[tuple[Any, Any], dict[str, Any]] = {}
    for entry in entries:
        slot = (entry.get("provider"), entry.get("model"))
        total = totals.setdefault(slot, {"provider": slot[0], "model": slot[1]})
        for count in COUNTS:
            if entry.get(count) is not None:
                total[count] = total.get(count, 0) + entry[count]
    return [{k: v for k, v in total.items() if v is not None} for total in totals.values()]
