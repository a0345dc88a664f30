"""Build presets: one module each, a small declarative object plus its templates.

A preset never touches another: adding a host is adding a module here and a folder under
``templates/``. A third party publishes one through the ``agent_unit.presets`` entry-point group:
a ``Preset`` (or a function returning one) whose ``template_package`` holds its ``templates/``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

__all__ = ["ENTRY_POINT_GROUP", "PRESETS", "BuildOptions", "Finish", "Preset", "Start", "local_python", "presets"]


@dataclass(frozen=True)
class BuildOptions:
    """The command line's host options: ``--arch``, ``--python``, ``--origin``."""

    arch: str | None = None
    python: str | None = None
    origin: str | None = None


def local_python() -> str:
    """This interpreter's version, ``"3.11"``: a target that matches it can be started here."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


@dataclass(frozen=True)
class Start:
    """How the host loads a build's output, so the build can prove it starts before it reports success.

    ``code`` runs in a fresh isolated Python with the function's folder first on ``sys.path``
    (and as ``FOLDER``): it imports the output's entry and creates the app, as the host does at
    a cold start.
    """

    code: str
    python: str = field(default_factory=local_python)  # the host's Python version
    platform: str | None = None  # the host's "linux-x86_64" or "linux-aarch64"; None: this machine
    folder: str = ""  # the function's folder, under the output
    archive: str = ""  # or a zip under the output that the host unpacks into the function's folder


@dataclass
class Finish:
    """What a preset's ``finish`` step gets: the output, the template context, and where to report."""

    root: Path
    output: Path
    context: dict[str, Any]
    options: BuildOptions
    progress: Callable[[str], None]
    warnings: list[str] = field(default_factory=list)  # what the preset found that the user should know


SERVER_NOTE = "server = {server}: the build serves your own app; agent-unit adds no engine, routes or storage"


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    output: str  # default output folder
    runs_on: str
    storage: str  # what storage it needs, for `agent-unit presets`
    templates: tuple[str, ...]  # template folders rendered into the output, in order
    run: str  # how to run or deploy the output (shown after a build)
    serverless: bool = False  # refuses storage that does not outlive an invocation
    workers: bool = False  # the host keeps a process alive, so a Temporal worker can run there ([temporal])
    notes: tuple[str, ...] = field(default_factory=tuple)
    agent_notes: tuple[str, ...] = field(default_factory=tuple)  # only for a build of agents/ (no ``server``)
    python_app: bool = True  # False: the host runs no Python (nothing copied or vendored)
    app_path: str = ""  # where the app, its vendored dependencies and the templates go, under the output
    app_folder: str = "app"  # the project's modules, under ``app_path`` ("": beside the entry)
    vendors: bool = True  # False: the host installs the packages (the build lists them as ``requirements``)
    host_modules: tuple[str, ...] = ()  # modules the host provides (Workers' ``workers``, ``js``): not vendored
    pip_platform: Callable[[BuildOptions], list[str]] | None = None  # pip's --platform... for the host
    check: Callable[[Any, BuildOptions], None] | None = None  # refuses a config the host cannot run
    context: Callable[[Any, BuildOptions], dict[str, Any]] | None = None  # more template values
    finish: Callable[[Finish], list[str]] | None = None  # the preset's own last steps; the files it wrote
    requirements: tuple[str, ...] = ()  # what the host's entry needs besides the runtime (pinned at build)
    start: Callable[[BuildOptions], Start] | None = None  # how the host loads the output (None: no Python app)
    runs_tasks: str = ""  # what runs ``[tasks]`` on this host, for the build's report; empty: nothing does
    unscheduled: str = ""  # with no ``runs_tasks``: what else can run the tasks on their schedules
    own_stores: dict[str, str] = field(default_factory=dict)  # storage schemes only this host reaches: what each is
    server_note: str = SERVER_NOTE  # what the build made of ``server = "module:app"`` here ({server}: its repr)
    template_package: str = "agent_unit_cli"  # the package whose templates/ holds ``templates`` (then ours)


def _load() -> dict[str, Preset]:
    """Every module of this package that defines ``preset``, the server first."""
    import importlib
    import pkgutil

    found = [importlib.import_module(f"{__name__}.{module.name}") for module in pkgutil.iter_modules(__path__)]
    presets = [module.preset for module in found if isinstance(getattr(module, "preset", None), Preset)]
    return {preset.name: preset for preset in sorted(presets, key=lambda preset: preset.name != "server")}


PRESETS = _load()
"""The built-in presets, by name."""

ENTRY_POINT_GROUP = "agent_unit.presets"


def _is_preset(value: object) -> TypeGuard[Preset]:
    return isinstance(value, Preset)


def presets() -> dict[str, Preset]:
    """The built-in presets, then the installed ones (which cannot replace a built-in); a
    ``ValueError`` naming an installed one that does not load or is not a ``Preset``."""
    from ..plugins import installed

    found = dict(PRESETS)
    hint = "export agent_unit_cli.presets.Preset(...)"
    for preset in installed(ENTRY_POINT_GROUP, _is_preset, "preset", hint):
        found.setdefault(preset.name, preset)
    return found
