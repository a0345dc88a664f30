"""Build the shop for the server preset and serve it: ``python examples/fastapi-app/serve.py``.

1. ``agent-unit build`` vendors the app (``server = "shop.main:app"``) into .output/server/.
2. ``python .output/server/main.py`` serves it on http://127.0.0.1:3000 (``PORT`` to change):
   the shop at ``/``, the agents at ``/api/ai``, the approvals inbox at ``/agents/``.

The runs and the ledger live in .agent-unit/ beside this file. Ctrl-C stops the server.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    build = [sys.executable, "-m", "agent_unit_cli", "build", "--root", str(HERE), "--preset", "server"]
    subprocess.run(build, check=True)
    port = os.environ.get("PORT", "3000")
    print(f"shop:  http://127.0.0.1:{port}/\ninbox: http://127.0.0.1:{port}/agents/", flush=True)
    environment = {"HOST": "127.0.0.1", "PORT": port, **os.environ}
    try:
        return subprocess.run(
            [sys.executable, str(HERE / ".output" / "server" / "main.py")], cwd=HERE, env=environment
        ).returncode
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
