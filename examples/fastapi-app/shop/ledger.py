"""A stand-in payment provider that writes every payout to a ledger file.

A real provider honours idempotency keys the same way: a repeated key has no second effect.
The ledger shows that each payout happened exactly once, across restarts too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def path() -> Path:
    """The ledger file: ``SHOP_LEDGER``, or ``.agent-unit/ledger.jsonl`` in the working directory."""
    return Path(os.environ.get("SHOP_LEDGER", ".agent-unit/ledger.jsonl"))


def pay(order_id: str, amount_cents: int, *, idempotency_key: str) -> str:
    """Pay out once per key; a repeated key returns the first payout's id and writes nothing."""
    for line in lines():
        if line["idempotency_key"] == idempotency_key:
            return str(line["payout"])
    payout = f"po_{idempotency_key[:12]}"
    ledger = path()
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with ledger.open("a") as out:
        out.write(
            json.dumps(
                {
                    "order_id": order_id,
                    "amount_cents": amount_cents,
                    "payout": payout,
                    "idempotency_key": idempotency_key,
                }
            )
            + "\n"
        )
    return payout


def lines() -> list[dict[str, object]]:
    """Every payout written so far."""
    ledger = path()
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line]
