"""An app that mounts the agents' API and the inbox apart, as an existing app would: ``TEST_STORE`` set."""

from __future__ import annotations

import os

from starlette.applications import Starlette
from starlette.routing import Mount

from agent_unit import create_agent_unit
from agent_unit.http import create_inbox

from .inbox_agents import AGENTS

app = Starlette(
    routes=[
        Mount("/api/ai", create_agent_unit(AGENTS, store=os.environ["TEST_STORE"], keepalive_seconds=0.5)),
        Mount("/agents", create_inbox("/api/ai")),
    ]
)
