"""``JSONResponse`` that always encodes: every JSON body of the HTTP API goes through it.

Values are checked where they are made (``agent_unit._jsontext``) and every store refuses a
lone surrogate, so none should reach a response. This is the last line behind that rule: if
one did, Starlette's response would raise while rendering (a 500); here it is written as its
JSON escape (``\\ud800``), as :func:`.sse.utf8` writes it in event streams.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import PydanticSerializationError
from starlette import responses

from .._records import RunRecord

__all__ = ["JSONResponse", "run_response"]


# One encoder for every response: json.dumps with arguments builds a new one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))


class JSONResponse(responses.JSONResponse):
    def render(self, content: Any) -> bytes:
        return _ENCODER.encode(content).encode(errors="backslashreplace")


def run_response(record: RunRecord, status_code: int = 200) -> responses.Response:
    """The run as the API shows it (:meth:`RunRecord.public`), encoded by pydantic straight to
    bytes; a run holding a lone surrogate goes through :class:`JSONResponse`, which escapes it."""
    try:
        body = record.public_json()
    except PydanticSerializationError:
        return JSONResponse(record.public(), status_code=status_code)
    return responses.Response(body, status_code=status_code, media_type="application/json")
