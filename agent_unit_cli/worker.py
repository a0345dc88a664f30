"""``agent-unit worker``: a Temporal worker for ``agents/`` alone, so HTTP servers and workers scale apart.

It executes the runs Temporal hands it (``[temporal]`` in the configuration) over the project's
store; ``agent-unit dev`` and the ``server`` build run one beside the HTTP app already.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from rich.console import Console

from agent_unit import __version__
from agent_unit.discovery import discover_project
from agent_unit.errors import ConfigError

from .config import load_config, store_url

__all__ = ["run"]


def run(root: Path, console: Console) -> None:
    """Serve the project's runs from Temporal until interrupted (Ctrl-C, SIGTERM)."""
    from agent_unit.temporal import serve_worker, temporal_settings

    config, source = load_config(root)
    table = config.temporal_table
    if table is None:
        raise ConfigError(
            f"{source or 'agent-unit.toml'}: agent-unit worker runs Temporal workers: add a [temporal] table "
            '(address, namespace, task_queue) or engine = "temporal"'
        )
    settings = temporal_settings(table)
    found = discover_project(root, adapters=config.adapters)
    if not found.agents:
        raise ConfigError("agents/ has no agents that load: add agents/<name>.py with `agent = define_agent(...)`")
    console.print(
        f"[bold]agent-unit {__version__}[/bold] worker: {len(found.agents)} agent(s) from Temporal at "
        f"{settings.address}, namespace {settings.namespace}, task queue {settings.task_queue}",
        soft_wrap=True,
        highlight=False,
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(
            serve_worker(
                found.agents,
                store_url(root, config),
                settings,
                broken=found.broken,
                adapters=config.adapters,
                budget=config.budget,
                approval_timeout=config.approval_timeout,
                retention=config.retention,
            )
        )
