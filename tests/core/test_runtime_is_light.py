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
        "from agent_unit._clock import ManualClock\n"
        "WorkersSim(ManualClock())\n"
        "from agent_unit.hosts.cloudflare import create_worker\n"
        "create_worker(lambda: {})\n"
        "loaded = {m.split('.')[0] for m in sys.modules} | {m for m in sys.modules if m.startswith('agent_unit')}\n"
        f"print(sorted(loaded & set({(*HEAVY, 'httpx', 'agent_unit.http')!r})))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


def test_a_lambda_handler_imports_no_pydantic_engine_or_asyncio_at_its_cold_start() -> None:
    """A Lambda's cold start is the handler's import: the engine, its pydantic records, Starlette and
    asyncio wait for the first invocation, which builds the app; `import agent_unit` alone is as light."""
    code = (
        "import sys\n"
        "from agent_unit.hosts.aws_lambda import lambda_handler, lambda_host\n"
        "host = lambda_host(None, 'a-secret-of-sixteen-chars')\n"
        "lambda_handler(lambda: None, tasks={}, host=host)\n"
        "import agent_unit\n"
        "loaded = {m.split('.')[0] for m in sys.modules} | set(sys.modules)\n"
        "print(sorted(loaded & {'pydantic', 'pydantic_core', 'asyncio', 'agent_unit._engine', 'agent_unit._records',"
        " 'agent_unit.http', 'agent_unit._tasks'}))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


def test_the_documented_names_import_from_agent_unit_at_first_use() -> None:
    code = (
        "import agent_unit\n"
        "from agent_unit import Run, RunEngine, define_agent, create_agent_unit, RunStatus, use_run\n"
        "assert agent_unit.Run is Run and RunStatus.completed == 'completed'\n"
        "print(sorted(name for name in agent_unit.__all__ if not hasattr(agent_unit, name)))"
    )
    missing = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert missing == "[]"
