"""Server presets: a framework's own server, built for every host as ``server = "module:app"`` is.

``server = "google-adk"`` (or ``[server] preset = "google-adk"`` with the preset's options) names
a server preset: an object with a ``name`` and an ``entry(root, gen_dir, preset, options)`` that
writes the module serving the framework's app into ``gen_dir`` and returns it as
``"module:attribute"``. The build then serves that app exactly as it serves your own: the same
import check, vendoring, host glue, Host and Origin checks (``HostGuard``) and start check, so a
server preset is only the few lines that make the framework's app.

Built-in ones are modules of this package; a third party publishes one through the
``agent_unit.servers`` entry-point group (the value: the object, or a function returning it).
"""

from __future__ import annotations

import importlib
import pkgutil
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeGuard, runtime_checkable

from agent_unit.http.origins import Origins

from ..plugins import installed
from ..presets import Preset

__all__ = [
    "ENTRY_POINT_GROUP",
    "GEN_DIR",
    "Generated",
    "ServerPreset",
    "find_server_preset",
    "generate",
    "server_presets",
]

ENTRY_POINT_GROUP = "agent_unit.servers"
GEN_DIR = Path(".agent-unit") / "server"
"""Where, under the project, the build and ``dev`` have a server preset write its module (never copied as source)."""


@runtime_checkable
class ServerPreset(Protocol):
    """What a server preset is. ``entry`` raises ``ValueError`` to refuse a host or an option,
    with a message that says what to do; ``requirements``, ``allowed_origins`` and ``note`` are optional."""

    name: str

    def entry(self, root: Path, gen_dir: Path, preset: Preset, options: Mapping[str, Any]) -> str:
        """Write the module serving the app into ``gen_dir`` (copied beside the project's modules)
        and return it as ``"module:attribute"``. ``preset`` is the build preset (``server`` in dev)."""
        ...


def _builtin() -> dict[str, ServerPreset]:
    found = [importlib.import_module(f"{__name__}.{module.name}") for module in pkgutil.iter_modules(__path__)]
    values = [getattr(module, "server", None) for module in found]
    return {value.name: value for value in values if isinstance(value, ServerPreset)}


def _is_server_preset(value: object) -> TypeGuard[ServerPreset]:
    return isinstance(value, ServerPreset)


def server_presets() -> dict[str, ServerPreset]:
    """The built-in server presets, then the installed ones (which cannot replace a built-in)."""
    found = _builtin()
    hint = "export an object with `name` and `entry(root, gen_dir, preset, options)`"
    for server in installed(ENTRY_POINT_GROUP, _is_server_preset, "server preset", hint):
        found.setdefault(server.name, server)
    return found


def find_server_preset(name: str) -> ServerPreset:
    """The server preset ``name``; a ``ValueError`` listing the known ones when there is none."""
    found = server_presets()
    if name not in found:
        raise ValueError(
            f"server = {name!r}: no server preset of that name: use one of {', '.join(sorted(found))}, "
            "install the package that provides it, or write 'module:app' for your own app"
        )
    return found[name]


@dataclass(frozen=True)
class Generated:
    """What a server preset made: the module serving the app, where it is, and what it needs."""

    preset: str  # the server preset's name
    reference: str  # "module:attribute", served as ``server = "module:app"`` is
    folder: Path  # the generated modules, copied beside the project's
    requirements: tuple[str, ...]  # distributions besides what its modules import (pinned at build)
    note: str  # what the build made of it, for the build's report
    allowed_origins: tuple[str, ...] = ()  # pages the app lets call (its CORS): the Host and Origin checks let them too


def generate(name: str, options: Mapping[str, Any], root: Path, preset: Preset) -> Generated:
    """Have the server preset ``name`` write its module for ``preset`` under the project's
    ``GEN_DIR`` (emptied first); a ``ValueError`` that says what to do when it refuses."""
    server = find_server_preset(name)
    folder = root / GEN_DIR
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    reference = server.entry(root, folder, preset, options)
    module, _, attribute = reference.partition(":")
    if not attribute or not ((folder / f"{module}.py").is_file() or (folder / module).is_dir()):
        raise ValueError(
            f"the server preset {name!r} returned {reference!r}: it must write that module into gen_dir "
            "and return 'module:attribute'"
        )
    required = getattr(server, "requirements", None)
    origins = getattr(server, "allowed_origins", None)
    pages = tuple(origins(options)) if callable(origins) else ()
    try:
        Origins(None, pages)  # what HostGuard will take: a wrong entry fails the build, not the app's start
    except ValueError as exc:
        raise ValueError(f"the server preset {name!r} returned {exc}") from None
    note = getattr(server, "note", None) or f"server = {name!r}: the build serves the {name} server preset's app"
    return Generated(
        preset=name,
        reference=reference,
        folder=folder,
        requirements=tuple(required(options)) if callable(required) else (),
        note=note,
        allowed_origins=pages,
    )
