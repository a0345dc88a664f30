"""The app a test uvicorn process serves: ``uvicorn tests.support.server_app:app`` with ``TEST_STORE`` set.

``TEST_AGENTS`` (``module:ATTRIBUTE``, default ``tests.support.http_agents:AGENTS``) names the agents;
``TEST_OPTIONS`` (JSON) adds options of ``create_agent_unit`` (``lease_ttl``, ``sweep_interval``...).
"""

from __future__ import annotations

import importlib
import json
import os

from agent_unit import create_agent_unit

module, _, attribute = os.environ.get("TEST_AGENTS", "tests.support.http_agents:AGENTS").partition(":")
AGENTS = getattr(importlib.import_module(module), attribute)

options = {"keepalive_seconds": 0.5, **json.loads(os.environ.get("TEST_OPTIONS", "{}"))}
app = create_agent_unit(AGENTS, store=os.environ["TEST_STORE"], **options)
