"""The shop's FastAPI app: its own pages and routes, the agents at ``/api/ai``, the inbox at ``/agents``.

The agents' API and the inbox are two mounts: the inbox page finds the API at ``/api/ai/``.
The store is the app's choice: ``SHOP_STORAGE`` (any agent-unit store URL), or a SQLite file.
"""

from __future__ import annotations

import os

from fastapi import FastAPI
from fastapi.responses import HTMLResponse

from agent_unit.http import create_agent_unit, create_inbox

from . import ledger
from .agents import AGENTS

STORAGE = os.environ.get("SHOP_STORAGE", "sqlite:///.agent-unit/shop.db")

app = FastAPI(title="Shop")
app.mount("/api/ai", create_agent_unit(AGENTS, store=STORAGE))
app.mount("/agents", create_inbox("/api/ai"))

HOME = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Shop</title></head>
<body>
<main>
<h1>Shop</h1>
<p>Refunds wait for a person: <a href="/agents/">open the approvals inbox</a>.</p>
<p>Ask for one: <code>curl -X POST localhost:3000/api/ai/agents/refund/runs
 -H 'content-type: application/json' -d '{"input": {"order_id": "o-1", "amount_cents": 4200}}'</code></p>
<p><a href="/payouts">Payouts so far</a></p>
</main>
</body>
</html>
"""


@app.get("/", response_class=HTMLResponse)
async def home() -> str:
    """The shop's own page, beside the agents."""
    return HOME


@app.get("/payouts")
async def payouts() -> list[dict[str, object]]:
    """The shop's own route: every payout the refund agent made."""
    return ledger.lines()
