"""Plugins published through an entry-point group: build presets and server presets load alike."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import TypeGuard, TypeVar

T = TypeVar("T")


def installed(group: str, accepts: Callable[[object], TypeGuard[T]], what: str, hint: str) -> list[T]:
    """Every entry point of ``group``, loaded (a factory is called); a ``ValueError`` naming one that
    fails to load, or is not ``what`` by ``accepts`` (``hint`` says what to export instead). A broken
    plugin is named, it does not stop the CLI with a traceback."""
    found: list[T] = []
    for entry in entry_points(group=group):
        try:
            value = entry.load()
            value = value() if callable(value) and not accepts(value) else value
        except Exception as exc:  # noqa: BLE001 - name the package that failed
            raise ValueError(f"the {what} {entry.name!r} ({entry.value}) failed to load: {exc}") from None
        if not accepts(value):
            raise ValueError(
                f"the {what} {entry.name!r} ({entry.value}) is a {type(value).__name__}, not a {what}: {hint}"
            )
        found.append(value)
    return found
