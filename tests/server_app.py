"""The app a test uvicorn process serves: ``uvicorn tests.server_app:app`` with ``TEST_STORE`` set."""

from __future__ import annotations

import os

from agent_unit import create_agent_unit

from .http_agents import AGENTS

app = create_agent_unit(AGENTS, store=os.environ["TEST_STORE"], keepalive_seconds=0.5)
