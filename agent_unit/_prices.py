"""What model calls cost: the deployment's prices per model, or the ``genai-prices`` package's.

A run's cost is priced from its token usage (as the journal keeps it, per provider and model), so
it is the same after a replay, a restart or a continuation. The deployment's ``[prices]`` give USD
per million tokens per model and win; a model they do not list is priced by ``genai-prices``
(pydantic's table of known models, ``pip install 'agent-unit[prices]'``) when it is installed and
``known`` is on. Its import costs about 0.2 s and 23 MB once per process (measured on the dev
machine), so it is imported only when a cost is asked for and a model is not listed. A model
priced by neither has no cost: a cost limit cannot hold over it (see :mod:`agent_unit._limits`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["COST", "Price", "Prices", "priced"]

COST = "costUsd"
"""The key of a usage entry's cost in USD (``cost_usd`` in the run record's snake_case usage)."""

_MILLION = 1_000_000


class Price(BaseModel):
    """USD per million tokens. ``cached_input``: for input tokens read from the provider's cache
    (counted in ``input`` tokens too, as providers report them); default: the ``input`` price."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)


class Prices(BaseModel):
    """``[prices]``: ``models`` maps a model name as usage shows it (``gpt-4.1``), or
    ``provider:model`` for one provider's, to its :class:`Price`; ``known``: price other models
    with ``genai-prices`` when it is installed."""

    model_config = ConfigDict(extra="forbid")

    known: bool = True
    models: dict[str, Price] = {}

    def cost(self, entry: Mapping[str, Any]) -> float | None:
        """The cost in USD of one usage entry (AG-UI ``TokenUsage``: ``provider``, ``model``,
        ``inputTokens``...), or None when no price is known for its model."""
        provider, model = entry.get("provider"), entry.get("model")
        given_in = int(entry.get("inputTokens") or 0)
        given_out = int(entry.get("outputTokens") or 0)
        cached = min(int(entry.get("cachedInputTokens") or 0), given_in)
        if not given_in and not given_out:
            return 0.0
        if not isinstance(model, str):
            return None
        price = self.models.get(f"{provider}:{model}") or self.models.get(model)
        if price is not None:
            cached_price = price.input if price.cached_input is None else price.cached_input
            total = (given_in - cached) * price.input + cached * cached_price + given_out * price.output
            return total / _MILLION
        if not self.known:
            return None
        return _known_cost(provider if isinstance(provider, str) else None, model, entry)


def priced(entries: list[dict[str, Any]], prices: Prices | None) -> list[dict[str, Any]]:
    """Usage entries with their cost (``costUsd``) where ``prices`` price their model; without
    ``prices``, as they are. A cost given before is priced again, so every entry has today's."""
    if prices is None:
        return entries
    out = []
    for entry in entries:
        plain = {key: value for key, value in entry.items() if key != COST}
        cost = prices.cost(plain)
        out.append(plain if cost is None else {**plain, COST: round(cost, 9)})
    return out


def _known_cost(provider: str | None, model: str, entry: Mapping[str, Any]) -> float | None:
    """The cost ``genai-prices`` gives, or None (not installed, or the model is not in its table).
    Its provider ids mostly match the providers frameworks report; an unknown one is left to its
    own matching by model name."""
    try:
        from genai_prices import Usage, calc_price
    except ImportError:
        return None
    counts = {
        "input_tokens": int(entry.get("inputTokens") or 0),
        "output_tokens": int(entry.get("outputTokens") or 0),
        "cache_read_tokens": int(entry.get("cachedInputTokens") or 0),
        "cache_write_tokens": int(entry.get("cacheWriteInputTokens") or 0),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        usage = Usage(**{key: value for key, value in counts.items() if value})
    for provider_id in dict.fromkeys((provider, None)):
        try:
            return float(calc_price(usage, model, provider_id=provider_id).total_price)
        except LookupError:
            continue
    return None
