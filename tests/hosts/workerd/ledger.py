"""A stand-in payment provider outside the Worker: it records every call the Worker makes to it.

The Worker reaches it over loopback HTTP (``LEDGER_URL`` in ``.dev.vars``), so what it counts
is what the Worker did, across restarts of ``wrangler dev``: a charge made once shows here once.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Ledger:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        calls = self.calls

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                calls.append({"path": self.path, **json.loads(self.rfile.read(length) or b"{}")})
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"ok": true}')

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> Ledger:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def made(self, path: str) -> list[dict[str, Any]]:
        return [call for call in self.calls if call["path"] == path]
