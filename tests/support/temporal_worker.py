"""A Temporal worker process for the tests: ``python -m tests.support.temporal_worker``.

``TEST_STORE`` is the store, ``TEST_TEMPORAL`` (JSON) the ``[temporal]`` table; the agents are
``TEST_WORKER_AGENTS`` (``module:ATTRIBUTE``), by default ``tests.support.temporal_agents``'s.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os

from agent_unit.temporal import serve_worker

if __name__ == "__main__":
    module, _, attribute = os.environ.get("TEST_WORKER_AGENTS", "tests.support.temporal_agents:AGENTS").partition(":")
    agents = getattr(importlib.import_module(module), attribute)
    asyncio.run(serve_worker(agents, os.environ["TEST_STORE"], json.loads(os.environ["TEST_TEMPORAL"])))
