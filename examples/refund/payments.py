"""A stand-in payment provider that records every call in a ledger file.

Like a real provider, ``refund`` honours idempotency keys: a repeated key has no second
effect. The ledger lets the demo show that each effect happened exactly once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

LEDGER = Path(os.environ.get("REFUND_LEDGER", ".agent-unit/ledger.jsonl"))


def _record(kind: str, **fields: object) -> None:
    LEDGER.parent.mkdir(parents=True, exist_ok=True)
    with LEDGER.open("a") as ledger:
        ledger.write(json.dumps({"call": kind, **fields}) + "\n")


def load_order(order_id: str) -> dict[str, object]:
    _record("load_order", order_id=order_id)
    return {"id": order_id, "amount_cents": 4200, "currency": "EUR"}


def refund(order: dict[str, object], *, idempotency_key: str) -> str:
    _record("refund", order_id=order["id"], idempotency_key=idempotency_key)
    return f"re_{idempotency_key[:12]}"


def calls() -> list[dict[str, object]]:
    if not LEDGER.exists():
        return []
    return [json.loads(line) for line in LEDGER.read_text().splitlines()]
