"""Spending limits per run: tokens, model calls and cost, checked before each model call is made.

A run carries its limits in its record (the deployment's ``[limits]``, lowered by its agent's
``define_agent(..., limits=...)`` and by the start request). Before a model call runs
(``ctx.durable.model``, so every framework adapter's), the run's usage so far is added up from its
journal, never from memory, so the check holds across replays, restarts and continuations. A call
that would pass a limit is not made: the run parks at a ``limit-reached`` interrupt, answered with
raised limits (``{"total_tokens": 5000}``) to go on, or fails with
:class:`~agent_unit.errors.LimitReached`, as ``on_limit`` says. The raised limits are the
interrupt's journaled answer, so a replay raises them at the same point. A cost limit
(``cost_usd``) prices the usage with the deployment's :class:`~agent_unit._prices.Prices`; a model
that nothing prices stops the run at the limit too (``used`` is null, ``unpriced`` names it): its
cost cannot be known, so the limit cannot be kept.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._prices import Prices
from ._usage import merge_usage
from .errors import InvalidArgument

__all__ = ["LIMIT_REACHED", "Limits", "cost", "first_passed", "totals"]

LIMIT_REACHED = "limit-reached"
"""The name of the interrupt a run parks at when a model call would pass one of its limits."""

_COUNTED = ("input_tokens", "output_tokens", "total_tokens")
_CAPPED = (*_COUNTED, "model_calls", "cost_usd")


class Limits(BaseModel):
    """What a run may spend; None: no limit. ``on_limit``: park (``interrupt``) or ``fail``."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    total_tokens: int | None = Field(default=None, ge=0)
    model_calls: int | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)
    """USD, priced by the deployment's ``[prices]`` (or ``genai-prices``)."""
    on_limit: Literal["interrupt", "fail"] = "interrupt"

    def within(self, ceiling: Limits | None) -> Limits:
        """These limits, refused (``InvalidArgument``, 422) where they go over ``ceiling``'s (the
        deployment's and the agent's): a start request may lower a limit, never raise it. Unset ones
        take the ceiling's, ``on_limit`` too."""
        if ceiling is None:
            return self
        for name in _CAPPED:
            mine, most = getattr(self, name), getattr(ceiling, name)
            if mine is not None and most is not None and mine > most:
                raise InvalidArgument(
                    f"limits.{name} = {mine} is over the most a run of this agent may have ({most}): ask for less"
                )
        return ceiling.lowered(self)

    def lowered(self, other: Limits | None) -> Limits:
        """The lower of these limits and ``other``'s, each limit on its own (an agent's and the
        deployment's: the lower wins); ``on_limit`` is ``other``'s where it sets one."""
        if other is None:
            return self
        values: dict[str, Any] = {"on_limit": other.on_limit if "on_limit" in other.model_fields_set else self.on_limit}
        for name in _CAPPED:
            given = [value for value in (getattr(self, name), getattr(other, name)) if value is not None]
            if given:
                values[name] = min(given)
        return Limits(**values)

    def raised(self, answer: Limits) -> Limits:
        """These limits with what an answer to ``limit-reached`` sets (a person may raise them)."""
        return self.model_copy(update=answer.model_dump(exclude_unset=True, exclude={"on_limit"}))


def totals(usage: list[dict[str, Any]]) -> dict[str, int]:
    """Tokens spent, summed over usage entries (AG-UI ``TokenUsage``, camelCase, as the journal keeps them)."""
    spent = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    for entry in usage:
        given_in, given_out = entry.get("inputTokens") or 0, entry.get("outputTokens") or 0
        spent["input_tokens"] += given_in
        spent["output_tokens"] += given_out
        spent["total_tokens"] += entry.get("totalTokens") or (given_in + given_out)
    return spent


def cost(usage: list[dict[str, Any]], prices: Prices) -> tuple[float, list[str]]:
    """What ``usage`` cost in USD, and the models (``provider:model``) no price is known for."""
    spent, unpriced = 0.0, []
    for entry in merge_usage(usage):
        found = prices.cost(entry)
        if found is None:
            unpriced.append(f"{entry.get('provider')}:{entry.get('model')}")
        else:
            spent += found
    return spent, unpriced


def first_passed(
    limits: Limits, usage: list[dict[str, Any]], calls: int, prices: Prices | None = None
) -> dict[str, Any] | None:
    """The limit the next model call would pass, after ``calls`` calls that spent ``usage``: its name,
    the limit and what was used; None if the call may be made. A token or cost limit reached already
    is passed by any call (a call spends tokens). A cost limit is passed too when a model of
    ``usage`` has no price (``used`` None, ``unpriced`` names the models)."""
    if limits.model_calls is not None and calls + 1 > limits.model_calls:
        return {"limit": "model_calls", "max": limits.model_calls, "used": calls}
    spent = totals(usage)
    for name in _COUNTED:
        most = getattr(limits, name)
        if most is not None and spent[name] >= most:
            return {"limit": name, "max": most, "used": spent[name]}
    if limits.cost_usd is not None:
        dollars, unpriced = cost(usage, prices or Prices())
        if unpriced:
            return {"limit": "cost_usd", "max": limits.cost_usd, "used": None, "unpriced": unpriced}
        if dollars >= limits.cost_usd:
            return {"limit": "cost_usd", "max": limits.cost_usd, "used": round(dollars, 9)}
    return None
