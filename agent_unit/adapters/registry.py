"""Which adapters apply, in order: the configuration's list, installed entry points, then the built-ins.

A framework's own adapter therefore replaces agent-unit's. Entry points are read from the
``agent_unit.adapters`` group; each names an :class:`Adapter`, or a function returning one.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Iterable, Sequence
from importlib.metadata import entry_points
from typing import Any

from .._agent import Agent, FrameworkAgent
from ..errors import AdapterError
from .api import Adapter

__all__ = ["BUILTINS", "ENTRY_POINT_GROUP", "adapters", "builtin_adapters", "load_adapter", "resolve_agent"]

ENTRY_POINT_GROUP = "agent_unit.adapters"

BUILTINS: dict[str, str] = {
    # the framework's top-level module: the module of agent-unit's adapter for it
    "pydantic_ai": "agent_unit.adapters.pydantic_ai",
    "agents": "agent_unit.adapters.openai_agents",
    "langgraph": "agent_unit.adapters.langgraph",
    "agent_framework": "agent_unit.adapters.agent_framework",
    "strands": "agent_unit.adapters.strands",
    "google.adk": "agent_unit.adapters.google_adk",  # `google` is a namespace package: key the subpackage
}
"""The built-in adapters. Each is imported only when its framework already is: a value of a
framework exists only if the user's code imported that framework, so nothing else pays for it."""


def _as_adapter(value: Any, source: str) -> Adapter:
    if callable(value) and not isinstance(value, Adapter):
        value = value()
    if not isinstance(value, Adapter):
        raise AdapterError(f"{source} is not an adapter: export define_adapter(...) or a function that returns one")
    return value


def load_adapter(reference: str) -> Adapter:
    """``"package.module:adapter"`` (or a function returning one), as the config's ``adapters`` lists."""
    module, _, attribute = reference.partition(":")
    try:
        value = importlib.import_module(module)
        for part in (attribute or "adapter").split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise AdapterError(f"adapter {reference!r} cannot be loaded: {exc}") from None
    return _as_adapter(value, reference)


def _installed() -> list[Adapter]:
    found = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            found.append(_as_adapter(entry.load(), f"entry point {entry.name!r} ({entry.value})"))
        except AdapterError:
            raise
        except Exception as exc:  # noqa: BLE001 - name the package that failed
            raise AdapterError(f"adapter entry point {entry.name!r} ({entry.value}) failed to load: {exc}") from None
    return found


def builtin_adapters() -> list[Adapter]:
    """The built-in adapters of the frameworks imported so far (discovery asks once per module value)."""
    return [_builtin(module) for framework, module in BUILTINS.items() if framework in sys.modules]


@functools.cache
def _builtin(module: str) -> Adapter:
    return load_adapter(f"{module}:adapter")


def adapters(configured: Sequence[str | Adapter] = ()) -> list[Adapter]:
    """Configured adapters first, then installed ones (entry points); the built-ins are tried last."""
    chosen = [item if isinstance(item, Adapter) else load_adapter(item) for item in configured]
    return [*chosen, *_installed()]


def resolve_agent(name: str, value: Any, candidates: Iterable[Adapter]) -> Agent | None:
    """``value`` as an agent: a ``define_agent`` agent as it is, or through the first adapter that matches
    (a framework's agent given to ``define_agent`` keeps the options it gave: limits, description).

    The built-ins come after ``candidates`` and are loaded here, once the user's modules (and
    so their frameworks) are imported.
    """
    if isinstance(value, Agent):
        return value
    options = value if isinstance(value, FrameworkAgent) else None
    framework = value.value if isinstance(value, FrameworkAgent) else value
    for adapter in [*candidates, *builtin_adapters()]:
        if adapter.match(framework):
            adapted = adapter.adapt(framework, name=name)
            return adapted if options is None else options.apply(adapted)
    return None
