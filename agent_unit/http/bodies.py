"""Request bodies: JSON only, refused (413) past ``max_body_bytes`` before they are read whole.

JSON only is also what keeps other web sites out: a page may send ``text/plain``,
form-encoded or multipart bodies to any origin without a CORS preflight, never
``application/json``. So every route that changes state refuses those content types (415),
even a route that reads no body.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.requests import Request

from ..errors import BadRequest, PayloadTooLarge, UnsupportedMediaType
from .headers import header

__all__ = [
    "lone_surrogate",
    "parse_json",
    "read_body",
    "read_json",
    "refuse_declared_oversize",
    "refuse_non_json",
    "require_json",
]

# A JSON escape of a UTF-16 surrogate: only a body holding one can decode to a string that
# is not valid Unicode, so only such a body pays for the walk through its strings.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _media_type(request: Request) -> str:
    return (header(request.scope, b"content-type") or "").split(";")[0].strip().lower()


def _is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


def refuse_non_json(request: Request) -> str:
    """415 unless the request declares no content type or a JSON one (routes that read no body);
    the media type declared (``""``: none)."""
    media = _media_type(request)
    if media and not _is_json(media):
        raise UnsupportedMediaType(f"content-type {media!r}: send application/json, or no body at all")
    return media


def require_json(request: Request) -> None:
    """415 unless the request declares a JSON content type (a page can also send a body with none)."""
    _require_media(refuse_non_json(request))


def _require_media(media: str) -> None:
    if not media:
        raise UnsupportedMediaType("content-type 'missing': send application/json")


def refuse_declared_oversize(request: Request, limit: int) -> None:
    """413 when ``Content-Length`` alone says the body is over ``limit``, before a byte is read."""
    declared = header(request.scope, b"content-length") or ""
    if not (declared.isascii() and declared.isdigit()):
        return  # no length, or not a number: the body is counted as it is read
    if len(declared) > 18:  # past any limit, and int() of a long enough string raises
        raise PayloadTooLarge(f"the body is over the limit of {limit:,} bytes (max_body_bytes)")
    if int(declared) > limit:
        raise PayloadTooLarge(f"the body is {int(declared):,} bytes, over the limit of {limit:,} (max_body_bytes)")


def lone_surrogate(value: Any) -> bool:
    """Whether a string anywhere in ``value`` (keys included) holds a lone surrogate: not valid
    Unicode, so it can be neither stored as UTF-8 nor sent back in a response."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode()
                except UnicodeEncodeError:
                    return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def parse_json(body: bytes) -> Any:
    """``body`` as JSON whose strings are all valid Unicode; BadRequest otherwise."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep to parse
        raise BadRequest(f"the body is not valid JSON: {exc}") from None
    if _SURROGATE_ESCAPE.search(body) and lone_surrogate(value):
        raise BadRequest(
            "the body holds a lone surrogate (a \\ud800-\\udfff escape without its pair): send strings of valid Unicode"
        )
    return value


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refused (413) as soon as it passes ``limit`` bytes; Starlette's
    ``ClientDisconnect`` if the client leaves before sending it (the app answers that quietly)."""
    refuse_declared_oversize(request, limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the body is over the limit of {limit:,} bytes (max_body_bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, limit: int, *, required: bool = True) -> dict[str, Any]:
    """The body as a JSON object; ``{}`` for an empty body when not ``required``."""
    media = refuse_non_json(request)  # before a byte is read: a cross-site form never reaches the route
    body = await read_body(request, limit)
    if not body.strip():
        if required:
            raise BadRequest("the body is empty: send a JSON object")
        return {}
    _require_media(media)  # the content type read once: the headers are the same as above
    value = parse_json(body)
    if not isinstance(value, dict):
        raise BadRequest(f"the body must be a JSON object, not {type(value).__name__}")
    return value
