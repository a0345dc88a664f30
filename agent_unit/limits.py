"""Spending limits per run: tokens and model calls, checked before each model call is made.

A run carries its limits in its record (the deployment's ``[limits]``, or lower ones given when it
starts). Before a model call runs (``ctx.durable.model``, so every framework adapter's), the run's
usage so far is added up from its journal, never from memory, so the check holds across replays,
restarts and continuations. A call that would pass a limit is not made: the run parks at a
``limit-reached`` interrupt, answered with raised limits (``{"total_tokens": 5000}``) to go on, or
fails with :class:`~agent_unit.errors.LimitReached`, as ``on_limit`` says. The raised limits are
the interrupt's journaled answer, so a replay raises them at the same point.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .errors import InvalidArgument

__all__ = ["LIMIT_REACHED", "Limits", "first_passed", "totals"]

LIMIT_REACHED = "limit-reached"
"""The name of the interrupt a run parks at when a model call would pass one of its limits."""

_COUNTED = ("input_tokens", "output_tokens", "total_tokens")


class Limits(BaseModel):
    """What a run may spend; None: no limit. ``on_limit``: park (``interrupt``) or ``fail``."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    total_tokens: int | None = Field(default=None, ge=0)
    model_calls: int | None = Field(default=None, ge=0)
    on_limit: Literal["interrupt", "fail"] = "interrupt"

    def within(self, ceiling: Limits | None) -> Limits:
        """These limits, refused (``InvalidArgument``, 422) where they go over ``ceiling``'s (the
        deployment's): a start request may lower a limit, never raise it. Unset ones take the ceiling's."""
        if ceiling is None:
            return self
        values: dict[str, Any] = {"on_limit": self.on_limit}
        for name in (*_COUNTED, "model_calls"):
            mine, most = getattr(self, name), getattr(ceiling, name)
            if mine is not None and most is not None and mine > most:
                raise InvalidArgument(f"limits.{name} = {mine} is over the deployment's limit ({most}): ask for less")
            values[name] = mine if mine is not None else most
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


def first_passed(limits: Limits, usage: list[dict[str, Any]], calls: int) -> dict[str, Any] | None:
    """The limit the next model call would pass, after ``calls`` calls that spent ``usage``: its name,
    the limit and what was used; None if the call may be made. A token limit reached already is
    passed by any call (a call spends tokens)."""
    if limits.model_calls is not None and calls + 1 > limits.model_calls:
        return {"limit": "model_calls", "max": limits.model_calls, "used": calls}
    spent = totals(usage)
    for name in _COUNTED:
        most = getattr(limits, name)
        if most is not None and spent[name] >= most:
            return {"limit": name, "max": most, "used": spent[name]}
    return None
