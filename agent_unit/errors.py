"""The errors agent-unit raises, each with a stable ``code`` and the HTTP status it maps to.

The HTTP layer turns them into ``{"error": {"code": ..., "message": ...}}``; the test unit and
the client raise the same types, so a test and production fail the same way.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "EngineUnavailable",
    "HttpError",
    "InternalError",
    "McpToolClash",
    "McpUnavailable",
    "MethodNotAllowed",
    "RouteNotFound",
    "TaskNotFound",
    "AdapterCheckFailed",
    "AdapterError",
    "AddError",
    "AgUiUnavailable",
    "BuildError",
    "ConfigError",
    "InterruptNotFound",
    "ItemTooLarge",
    "PipError",
    "PublicUrlMissing",
    "RpcError",
    "StepFailed",
    "AgentBroken",
    "AgentNotFound",
    "BadRequest",
    "Forbidden",
    "ForbiddenHost",
    "ForbiddenOrigin",
    "AgentUnitError",
    "DiscoveryError",
    "InvalidAnswer",
    "InvalidArgument",
    "InvalidInput",
    "InterruptExpired",
    "LimitReached",
    "NotFailed",
    "LeaseLost",
    "NonDeterminismError",
    "NotInterrupted",
    "PayloadTooLarge",
    "RunConflict",
    "RunNotFound",
    "ServerError",
    "StepResultError",
    "Unauthorized",
    "StoreConfigError",
    "StoreUnavailable",
    "TaskError",
    "UnstorableValue",
    "StoreValueError",
    "UnsupportedMediaType",
    "VALUE_ERRORS",
]

VALUE_ERRORS: tuple[type[BaseException], ...] = (ValueError, TypeError, RecursionError, OverflowError)
"""What a value raises when it cannot be written (not UTF-8, not JSON, too deep): the error of
whoever made the value, never an outage of the store, so never a reason to run work again."""


class AgentUnitError(Exception):
    """Base class: ``code`` names the error for machines, the message tells a person what to do."""

    code: str = "error"
    status: int = 500

    def __init__(self, message: str, *, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return {"error": error}

    def headers(self) -> dict[str, str]:
        """HTTP headers every response for this error carries, whichever route writes it."""
        return {}


class AgentNotFound(AgentUnitError):
    code, status = "agent_not_found", 404


class RunNotFound(AgentUnitError):
    code, status = "run_not_found", 404


class RouteNotFound(AgentUnitError):
    """No route answers this path (a typo in the URL or ``base_path``)."""

    code, status = "not_found", 404


class MethodNotAllowed(AgentUnitError):
    """The route exists, not with this method (the response's ``Allow`` header names the ones it takes)."""

    code, status = "method_not_allowed", 405


class TaskNotFound(AgentUnitError):
    """A host's scheduler called a task this deployment does not have (a stale cron entry)."""

    code, status = "task_not_found", 404


class InterruptNotFound(RunNotFound):
    """An AG-UI resume entry names no interrupt of this agent (the run does not exist, or is another agent's)."""

    code = "interrupt_not_found"


class InvalidInput(AgentUnitError):
    """The agent's input does not fit its schema; no run was created."""

    code, status = "invalid_input", 422


class InvalidArgument(AgentUnitError):
    """A request parameter is not one of the accepted values."""

    code, status = "invalid_argument", 422


class InvalidAnswer(AgentUnitError):
    """A resume answer does not fit the interrupt's schema; the run stays parked."""

    code, status = "invalid_answer", 422


class RunConflict(AgentUnitError):
    """Someone else changed the run first (a lost compare-and-set), or it is in the wrong status."""

    code, status = "conflict", 409


class NotInterrupted(RunConflict):
    code = "not_interrupted"


class NotFailed(RunConflict):
    """A retry of a run that has not failed: only a failed run is retried."""

    code = "not_failed"


class InterruptExpired(RunConflict):
    """An interrupt's deadline passed with no answer.

    Raised inside the agent by ``run.interrupt(..., timeout=...)`` when no ``default`` was given
    (catch it to take another branch); and a resume that arrives after the deadline is refused
    with it (409), saying when the interrupt expired.
    """

    code = "interrupt_expired"


class LimitReached(AgentUnitError):
    """A model call would pass one of the run's limits (``on_limit = "fail"``): it was not made."""

    code, status = "limit_reached", 409


class LeaseLost(RunConflict):
    """This process no longer holds the run's lease: another took it over, or it was cancelled."""

    code = "lease_lost"


class UnstorableValue(AgentUnitError):
    """A value the agent made cannot be stored: not JSON, not UTF-8, nested too deeply, or larger than
    ``max_step_bytes`` (an event from ``run.emit``, a state value, the run's output)."""

    code, status = "unstorable_value", 500


class StepResultError(UnstorableValue):
    """A step's result cannot be journaled: not JSON-serialisable, or larger than ``max_step_bytes``."""

    code = "step_result"


class StepFailed(AgentUnitError):
    """A journaled step failure whose exception type cannot be rebuilt on replay."""

    code = "step_failed"


class NonDeterminismError(AgentUnitError):
    """On replay the code asked for something different from what the journal recorded."""

    code, status = "non_determinism", 500


class DiscoveryError(AgentUnitError):
    """``agents/`` holds a module that is not exactly one agent."""

    code, status = "discovery", 500


class AgentBroken(AgentUnitError):
    """The agent's file does not import or define an agent (``agent-unit dev`` serves the others).

    ``details`` holds the ``file`` and ``line`` at fault. Nothing of its runs changes while it
    is broken: a start or resume is refused (503), and its parked runs wait until it loads again.
    """

    code, status = "agent_broken", 503


class BadRequest(AgentUnitError):
    """The request is malformed: not JSON, not an object, unknown fields."""

    code, status = "bad_request", 400


class Unauthorized(AgentUnitError):
    """Raise from ``authorize`` when the caller is not signed in (401)."""

    code, status = "unauthorized", 401


class Forbidden(AgentUnitError):
    """The ``authorize`` hook refused the request (403)."""

    code, status = "forbidden", 403


class ForbiddenOrigin(Forbidden):
    """A browser page from an origin that is not allowed sent the request (403)."""

    code = "forbidden_origin"


class ForbiddenHost(AgentUnitError):
    """The request's ``Host`` is not one of the deployment's names (421): a page at a foreign
    domain whose DNS was pointed at the server (DNS rebinding), or a name to add to ``allowed_hosts``."""

    code, status = "forbidden_host", 421


class PayloadTooLarge(AgentUnitError):
    code, status = "payload_too_large", 413


class StoreUnavailable(AgentUnitError):
    """The store cannot be reached, refused us (a wrong password), or stayed busy (a lock, throttling).

    An outage: the same write may succeed later, so a run is recovered from its journal and a
    client is told to retry (503 with ``Retry-After``). The message names the store's kind only,
    never its host, port or database (the log has those, without the password).
    """

    code, status = "store_unavailable", 503
    retry_after: int = 1
    """Seconds a client should wait before it tries again (the ``Retry-After`` header)."""

    def headers(self) -> dict[str, str]:
        return {"retry-after": str(self.retry_after)}  # an outage: the same request may succeed a moment later


class EngineUnavailable(StoreUnavailable):
    """The engine that drives runs (Temporal, with ``[temporal]``) cannot be reached: 503, try again.

    Nothing was changed: a run whose start it refused is not kept.
    """

    code = "engine_unavailable"


class StoreConfigError(StoreUnavailable, ValueError):
    """The store URL cannot be used as written (a port that is not a number, an unknown option or scheme).

    Also a ``ValueError``, so code that checked a URL that way still does; the message names the problem.
    """


class StoreValueError(AgentUnitError):
    """A value cannot be stored as it is: text that is not valid Unicode (a lone surrogate), a number
    or size the store cannot hold. The fault of the value, never an outage: nothing was written, and
    the write would fail again, so the engine makes it the run's error (or the request's, 422)."""

    code, status = "invalid_value", 422


class ItemTooLarge(StoreValueError):
    """A value does not fit in a DynamoDB item; nothing was written (the value's fault, not an outage)."""

    code, status = "item_too_large", 413


class UnsupportedMediaType(AgentUnitError):
    code, status = "unsupported_media_type", 415


class TaskError(AgentUnitError):
    """A scheduled task cannot be used: a schedule that is not portable, a handler that cannot be
    imported. The message names the task, and for an import the user's own line that failed."""

    code, status = "task", 500


class InternalError(AgentUnitError):
    """Our bug, or an unexpected failure: the server logged the details and sends none of them."""

    code, status = "internal", 500


class HttpError(AgentUnitError):
    """An HTTP error without a code of its own: a status the web framework chose, or a response that is
    not agent-unit's JSON (a proxy's page); the message starts with the status."""

    code = "http_error"


class ServerError(AgentUnitError):
    """``server = "module:app"`` cannot be served: the module does not import, or the value is not
    an ASGI app. The message names the module, the attribute and the user's own line that failed."""

    code, status = "server", 500


class AdapterError(AgentUnitError):
    """An adapter cannot be used: wrong API version, not an adapter, or it failed to load."""

    code = "adapter"


class AdapterCheckFailed(AssertionError):
    """What :func:`agent_unit.testing.assert_adapter` found: effects outside journaled calls, or repeated.

    An ``AssertionError``, so pytest reports it as a failed check, not as an error of the test."""


class PublicUrlMissing(AgentUnitError):
    """The A2A card must name the deployment's own URL, and the configuration does not give it.

    503, not 500: nothing failed, the deployment is not configured to serve a card yet."""

    code, status = "public_url_missing", 503


class AgUiUnavailable(AgentUnitError):
    """The AG-UI route needs the ``ag-ui-protocol`` package, which is not installed."""

    code, status = "ag_ui_unavailable", 501


class McpUnavailable(AgentUnitError):
    """``POST /mcp`` needs the MCP SDK (2.x), which is not installed."""

    code, status = "mcp_not_installed", 501


class McpToolClash(AgentUnitError):
    """An agent has the name of the MCP tool that resumes runs, so ``POST /mcp`` is refused."""

    code, status = "mcp_tool_clash", 500


class RpcError(Exception):
    """An A2A JSON-RPC error: ``code`` as A2A defines it (an integer, not one of the codes above), a
    message that says what to do, optional details. Never leaves the A2A route as an exception: it
    becomes the JSON-RPC response's ``error``."""

    def __init__(self, code: int, message: str, *, details: Any = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.details, self.reason = code, message, details, reason


# -- the build tool's (agent_unit_cli): raised and reported by the CLI, never by the runtime ------


class ConfigError(Exception):
    """The configuration cannot be used; the message names the file and the key."""


class BuildError(Exception):
    """The build cannot go on; the message says what to change."""


class AddError(Exception):
    """``agent-unit add``: the package cannot be added; nothing was changed."""


class PipError(Exception):
    """pip failed; the message ends with pip's own error."""
