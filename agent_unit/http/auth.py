"""Who may do what: the ``authorize`` hook for public routes, the shared secret for internal ones."""

from __future__ import annotations

import hmac
import importlib
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request

from .. import _jsontext as jsontext
from .. import env
from ..errors import Forbidden, Unauthorized

__all__ = ["Authorize", "Forbidden", "Unauthorized", "answerer", "check_secret", "load_authorize"]

# authorize(request, action, run) -> bool, or the identity of who asks (a non-empty string: allowed);
# ``run`` is {"agent", "thread_id", "id"} as known
Authorize = Callable[[Request, str, dict[str, Any]], "bool | str | Awaitable[bool | str]"]

MAX_IDENTITY = 256


def load_authorize(value: Authorize | str | None) -> Authorize | None:
    """The hook itself, or ``"module:function"`` from the configuration."""
    if value is None or callable(value):
        return value
    module, _, name = value.partition(":")
    if not module or not name:
        raise ValueError(f"authorize = {value!r}: write it as 'module:function', e.g. 'app.auth:authorize'")
    try:
        hook = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"authorize = {value!r} cannot be loaded: {exc}") from None
    if not callable(hook):
        raise ValueError(f"authorize = {value!r} is not a function")
    return hook  # type: ignore[no-any-return]


async def authorize(hook: Authorize | None, request: Request, action: str, run: dict[str, Any]) -> None:
    if hook is None:
        return
    allowed = hook(request, action, run)
    if inspect.isawaitable(allowed):
        allowed = await allowed
    if not allowed:
        raise Forbidden(f"not allowed to {action.replace('_', ' ')}")
    if isinstance(allowed, str):
        request.state.agent_unit_identity = allowed


def answerer(request: Request | None) -> str | None:
    """Who is asking, as a resume records it: the identity ``authorize`` returned (a string), else
    the request's authenticated user (Starlette's ``AuthenticationMiddleware``: ``request.user``),
    else None. Shortened to 256 characters and scrubbed, so any identity can be stored."""
    if request is None:
        return None
    # request.state keeps its attributes in scope["state"]: read there, a missing one raises nothing
    identity: Any = request.scope.get("state", {}).get("agent_unit_identity")
    if identity is None and "user" in request.scope:
        identity = _user_name(request.scope["user"])
    if not isinstance(identity, str) or not identity:
        return None
    return jsontext.scrub(identity[:MAX_IDENTITY])


def _user_name(user: Any) -> Any:
    """An authenticated user's identity or display name (Starlette's ``BaseUser`` raises
    ``NotImplementedError`` for what a user class leaves out)."""
    for name in ("is_authenticated", "identity", "display_name"):
        try:
            value = getattr(user, name, None)
        except NotImplementedError:
            value = None
        if name == "is_authenticated":
            if not value:
                return None
        elif isinstance(value, str) and value:
            return value
    return None


def production() -> bool:
    return str(env.get("AGENT_UNIT_ENV", "")) == "production"


def check_secret(request: Request, secret: str | None, *, required: bool) -> None:
    """Internal endpoints: ``Authorization: Bearer <AGENT_UNIT_SECRET>``, compared in constant time.

    Without a configured secret they are open in development and refused where ``required``
    (production, serverless presets).
    """
    if not secret:
        if required:
            raise Unauthorized("internal endpoints are disabled: set AGENT_UNIT_SECRET to enable them")
        return
    given = request.headers.get("authorization", "")
    scheme, _, token = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), secret.encode()):
        raise Unauthorized("missing or wrong secret: send Authorization: Bearer $AGENT_UNIT_SECRET")
