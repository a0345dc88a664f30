"""Request bodies: JSON only, refused (413) past ``max_body_bytes`` before they are read whole."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from ..errors import BadRequest, PayloadTooLarge, UnsupportedMediaType

__all__ = ["read_json"]


async def read_json(request: Request, limit: int, *, required: bool = True) -> dict[str, Any]:
    """The body as a JSON object; ``{}`` for an empty body when not ``required``."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the body is {int(declared):,} bytes, over the limit of {limit:,} (max_body_bytes)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the body is over the limit of {limit:,} bytes (max_body_bytes)")
        chunks.append(chunk)
    body = b"".join(chunks)
    if not body.strip():
        if required:
            raise BadRequest("the body is empty: send a JSON object")
        return {}
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise UnsupportedMediaType(f"content-type {media or 'missing'!r}: send application/json")
    try:
        value = json.loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep to parse
        raise BadRequest(f"the body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BadRequest(f"the body must be a JSON object, not {type(value).__name__}")
    return value
