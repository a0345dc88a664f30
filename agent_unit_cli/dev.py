"""The app ``agent-unit dev`` serves (an import string, so uvicorn can reload it on change)."""

from __future__ import annotations

import os
from pathlib import Path

from agent_unit import create_agent_unit
from agent_unit.discovery import discover_agents
from agent_unit.http import AgentUnit
from agent_unit.tasks import tasks_from_config

from .config import load_config


def app() -> AgentUnit:
    """Discover ``agents/`` under ``$AGENT_UNIT_ROOT`` and serve them with the project's configuration."""
    root = Path(os.environ.get("AGENT_UNIT_ROOT", "."))
    config, _ = load_config(root)
    return create_agent_unit(
        discover_agents(root, adapters=config.adapters),
        store=config.storage or f"sqlite:///{root.resolve() / '.agent-unit' / 'agent-unit.db'}",  # beside the project
        name=config.name,
        base_path=config.base_path,
        authorize=config.authorize,
        max_body_bytes=config.max_body_bytes,
        budget=config.budget,
        retention=config.retention,
        tasks=tasks_from_config(config.tasks, root=root.resolve()),  # the in-process scheduler runs them
    )
