"""The route table: every route the HTTP app serves, written once, as data.

The app (``create_agent_unit``) builds its Starlette routes from it, ``agent-unit build``
lists the public ones it marks ``listed``, and the netlify preset proxies every public one
to its backend: a route added here is served, listed and proxied without another change.
Paths are relative to the app's ``base_path``, with the app's own placeholders
(``{agent}``, ``{run_id}``), as spec/openapi.yaml writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ROUTES", "RouteSpec", "public_routes", "served_routes"]

Option = Literal["mcp", "ui"]


@dataclass(frozen=True, slots=True)
class RouteSpec:
    """One route: ``methods`` on ``path``, served by the app's endpoint ``name``.

    ``internal``: guarded by the secret, for the host's own scheduler only (never proxied or
    listed). ``only_with``: served only when that option of ``create_agent_unit`` is on.
    ``listed``: shown in the build's summary (aliases of a listed route are not).
    """

    methods: tuple[str, ...]
    path: str
    name: str
    serves: str
    internal: bool = False
    only_with: Option | None = None
    listed: bool = True


def _cards() -> tuple[RouteSpec, ...]:
    """A2A cards: the deployment's and each agent's, also under each endpoint's own path, where a
    client given only that URL looks; ``agent.json`` is the name A2A 0.2 clients read."""
    return tuple(
        RouteSpec(
            ("GET",),
            f"{where}/.well-known/{file}",
            "a2a_card",
            "the A2A agent card",
            listed=(where, file) in (("", "agent-card.json"), ("/agents/{agent}", "agent-card.json")),
        )
        for where in ("", "/a2a", "/agents/{agent}", "/agents/{agent}/a2a")
        for file in ("agent-card.json", "agent.json")
    )


ROUTES: tuple[RouteSpec, ...] = (
    RouteSpec(("GET",), "/agents", "manifest", "the agents: name, description, framework, input schema"),
    RouteSpec(("POST",), "/agents/{agent}/runs", "start", "start a run (its events, with accept: text/event-stream)"),
    RouteSpec(("GET",), "/runs", "list", "the runs, newest first, by status, agent or thread"),
    # one route for both, so a 405 lists both in Allow
    RouteSpec(("GET", "DELETE"), "/runs/{run_id}", "run", "a run's record; delete a finished run"),
    RouteSpec(("GET",), "/runs/{run_id}/events", "events", "a run's events (SSE), from Last-Event-ID"),
    RouteSpec(("POST",), "/runs/{run_id}/resume", "resume", "answer a run's interrupt"),
    RouteSpec(("POST",), "/runs/{run_id}/cancel", "cancel", "cancel a live run"),
    RouteSpec(("POST",), "/runs/{run_id}/retry", "retry", "retry a failed run from the work that failed"),
    RouteSpec(("GET",), "/healthz", "healthz", "200 while the store answers (outside authorize)"),
    RouteSpec(("POST",), "/__agent-unit/continue", "continue", "continue a run that yielded", internal=True),
    RouteSpec(("POST",), "/__agent-unit/sweep", "sweep", "wake due runs, recover lapsed ones", internal=True),
    RouteSpec(("POST",), "/agents/{agent}/ag-ui", "ag_ui", "AG-UI: RunAgentInput in, AG-UI events out"),
    *_cards(),
    RouteSpec(("POST",), "/a2a", "a2a", "A2A JSON-RPC: a task is a durable run"),
    RouteSpec(("POST",), "/agents/{agent}/a2a", "a2a", "A2A JSON-RPC for one agent"),
    RouteSpec(("POST",), "/mcp", "mcp", "MCP (streamable HTTP): every agent a tool", only_with="mcp"),
    RouteSpec(("GET",), "/ui", "ui", "the approvals inbox", only_with="ui", listed=False),
    RouteSpec(("GET",), "/ui/", "ui", "the approvals inbox", only_with="ui"),
    RouteSpec(("GET",), "/ui/{file}", "ui", "the approvals inbox's files", only_with="ui", listed=False),
)


def served_routes(*, mcp: bool = True, ui: bool = False) -> list[RouteSpec]:
    """The routes an app with these options serves, in the table's order."""
    on = {"mcp": mcp, "ui": ui}
    return [route for route in ROUTES if route.only_with is None or on[route.only_with]]


def public_routes(*, mcp: bool = True, ui: bool = False) -> list[RouteSpec]:
    """The routes a client may call (not the host's internal ones), in the table's order."""
    return [route for route in served_routes(mcp=mcp, ui=ui) if not route.internal]
