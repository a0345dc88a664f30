"""Calls to the tests' ledger (``LEDGER_URL``, a secret in ``.dev.vars``), made from the Worker."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from agent_unit.env import env


async def record(path: str, **fields: Any) -> None:
    from pyodide.http import pyfetch  # only a Worker has it (the build imports this module)

    response = await pyfetch(
        f"{env['LEDGER_URL']}{path}",
        method="POST",
        body=json.dumps(fields),
        headers={"content-type": "application/json"},
    )
    if not response.ok:
        raise RuntimeError(f"the ledger answered {response.status}")


async def digest(name: str, scheduled_at: datetime) -> None:
    """The scheduled task: recorded once per tick."""
    await record("/digest", name=name, at=scheduled_at.isoformat())
