"""The route table: the app, the build's listing, the netlify preset and the OpenAPI document agree."""

from __future__ import annotations

from pathlib import Path

import yaml
from starlette.routing import Route

from agent_unit import create_agent_unit
from agent_unit.http.routes import public_routes, served_routes
from agent_unit_cli.build import routes

from ..support.http_agents import AGENTS

SPEC = Path(__file__).resolve().parents[2] / "spec" / "openapi.yaml"


def test_the_app_serves_the_table_s_routes_and_the_inbox_only_with_ui() -> None:
    for ui in (False, True):
        app = create_agent_unit(AGENTS, store="memory://", ui=ui)
        served = {
            (route.path, method) for route in app.routes if isinstance(route, Route) for method in route.methods or ()
        }
        table = {(spec.path, method) for spec in served_routes(ui=ui) for method in spec.methods}
        assert table <= served and ((("/ui/", "GET") in served) == ui)


def test_every_path_of_the_openapi_document_is_a_public_route_of_the_table() -> None:
    documented = set(yaml.safe_load(SPEC.read_text())["paths"])
    internal = {spec.path for spec in served_routes(ui=True) if spec.internal}
    assert documented - internal <= {spec.path for spec in public_routes(ui=True)}
    assert "/ui/" in documented


def test_the_build_listing_shows_the_inbox_only_when_ui_is_on_and_never_the_internal_routes() -> None:
    assert "GET    /api/ui/" in routes("/api/", ui=True) and not any("/ui" in line for line in routes("/api/"))
    assert not any("__agent-unit" in line for line in routes("/", ui=True))
