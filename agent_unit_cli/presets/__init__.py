"""Build presets: one module each, a small declarative object plus its templates.

A preset never touches another: adding a host is adding a module here and a folder under
``templates/``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PRESETS", "Preset"]


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
    notes: tuple[str, ...] = field(default_factory=tuple)


def _load() -> dict[str, Preset]:
    from . import docker, server

    return {preset.name: preset for preset in (server.preset, docker.preset)}


PRESETS = _load()
