"""``JSONResponse`` that always encodes: every JSON body of the HTTP API goes through it.

A store that keeps Python strings (``memory://``) can hand back a value holding a lone
surrogate, which UTF-8 cannot encode; Starlette's response would raise while rendering, a
500 for a value that is the run's own. Here the surrogate is written as its JSON escape
(``\\ud800``), the same way :func:`.sse.utf8` writes it in event streams.
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
