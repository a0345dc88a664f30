"""Help that shows a flag as a flag.

Typer's rich help gives every option a type column, and a flag's is ``<bool>``
(``--json <bool>``), which reads as if the flag took a value. A flag's ``metavar`` is what
that column shows when it is set, so these command classes set it to nothing for every flag,
``--help`` and the completion options included (Typer adds those itself, so this is done where
the help reads the parameters, not where they are declared).
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand, TyperGroup

__all__ = ["Command", "Group"]


def _untyped(params: list[Any]) -> list[Any]:
    for param in params:
        if getattr(param, "is_flag", False):
            param.metavar = ""
    return params


class Command(TyperCommand):
    """A command whose help shows no type for its flags."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _untyped(super().get_params(ctx))


class Group(TyperGroup):
    """A group whose help shows no type for its flags."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _untyped(super().get_params(ctx))
