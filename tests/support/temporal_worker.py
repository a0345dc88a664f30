"""A Temporal worker process for the tests: ``python -m tests.support.temporal_worker``.

``TEST_STORE`` is the store, ``TEST_TEMPORAL`` (JSON) the ``[temporal]`` table; the agents are
``tests.support.temporal_agents``'s.
"""

from __future__ import annotations

import asyncio
import json
import os

from agent_unit.temporal import serve_worker

from .temporal_agents import AGENTS

if __name__ == "__main__":
    asyncio.run(serve_worker(AGENTS, os.environ["TEST_STORE"], json.loads(os.environ["TEST_TEMPORAL"])))
