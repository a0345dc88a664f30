"""The runtime ships into every Lambda and Worker: importing it must not pull in the CLI or heavy extras."""

from __future__ import annotations

import subprocess
import sys

HEAVY = (
    "agent_unit_cli",
    "typer",
    "rich",
    "jinja2",
    "jsonschema",
    "ag_ui",
    "starlette",
    "redis",
    "psycopg",
    "boto3",
    "mcp",
    "a2a",
    "pydantic_ai",
    "agents",
    "google",  # google-adk (and google-genai): only a user of ADK imports it
    "langgraph",
    "agent_framework",
    "strands",
    "mangum",
)


def test_import_agent_unit_loads_nothing_heavy() -> None:
    code = (
        "import sys, agent_unit, agent_unit.testing, agent_unit.discovery, agent_unit.runtime\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


def test_a_workers_entry_imports_nothing_heavy_until_its_first_request() -> None:
    """Workers limit startup time: the entry's import and create_worker load no app, no agents."""
    code = (
        "import sys\n"
        "from tests.hosts.cloudflare.workers_sim import WorkersSim\n"
        "from agent_unit.clock import ManualClock\n"
        "WorkersSim(ManualClock())\n"
        "from agent_unit.hosts.cloudflare import create_worker\n"
        "create_worker(lambda: {})\n"
        "loaded = {m.split('.')[0] for m in sys.modules} | {m for m in sys.modules if m.startswith('agent_unit')}\n"
        f"print(sorted(loaded & set({(*HEAVY, 'httpx', 'agent_unit.http')!r})))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"
