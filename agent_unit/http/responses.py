"""``JSONResponse`` that always encodes: every JSON body of the HTTP API goes through it.

Values are checked where they are made (``agent_unit.jsontext``) and every store refuses a
lone surrogate, so none should reach a response. This is the last line behind that rule: if
one did, Starlette's response would raise while rendering (a 500); here it is written as its
JSON escape (``\\ud800``), as :func:`.sse.utf8` writes it in event streams.
"""

from __future__ import annotations

import json
from typing import Any

from starlette import responses

__all__ = ["JSONResponse"]


class JSONResponse(responses.JSONResponse):
    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))
        return text.encode(errors="backslashreplace")
