"""The three Python entry templates (server, aws-lambda, vercel) share their common part and
pass the configuration to the app alike, ``ui`` included; every entry of your own app (and
cloudflare's) puts agent-unit's Host and Origin checks in front of it."""

from __future__ import annotations

import ast
from typing import Any

import pytest
from jinja2 import Environment, PackageLoader, StrictUndefined

ENTRIES = ["server/main.py.j2", "aws-lambda/handler.py.j2", "vercel/functions/agent-unit.func/agent_unit_app.py.j2"]
CLOUDFLARE = {"runtime": "default", "crons": {}, "exports": None, "run_class": "R", "index_class": "I"}


def _render(template: str, **overrides: Any) -> str:
    templates = Environment(
        loader=PackageLoader("agent_unit_cli", "templates"), undefined=StrictUndefined, keep_trailing_newline=True
    )
    templates.filters["py"] = repr
    context: dict[str, Any] = {
        "name": "shop",
        "version": "0",
        "preset": "server",
        "registry": {"refund": ("agents.refund", "agent")},
        "tasks": {},
        "temporal": None,
        "server": None,
        "storage": "sqlite:///.agent-unit/agent-unit.db",
        "lambda_storage": "dynamodb://runs",
        "base_path": "/api",
        "authorize": "app.auth:authorize",
        "max_body_bytes": 1000,
        "allowed_origins": ["https://app.example.com"],
        "allowed_hosts": [],
        "host_guard": True,
        "a2a_default_agent": "refund",
        "budget": "60s",
        "retention": "30d",
        "adapters": [],
        "url": "https://agents.example.com",
        "ui": False,
        **overrides,
    }
    return templates.get_template(template).render(**context)


def _app_options(source: str) -> dict[str, Any]:
    """The keywords of the call that makes the app (the one given ``base_path``), literal ones evaluated."""
    [call] = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and any(keyword.arg == "base_path" for keyword in node.keywords)
    ]
    return {
        keyword.arg: ast.literal_eval(keyword.value)
        for keyword in call.keywords
        if keyword.arg is not None and isinstance(keyword.value, ast.Constant | ast.List)
    }


@pytest.mark.parametrize("template", ENTRIES)
@pytest.mark.parametrize("ui", [True, False])
def test_every_entry_passes_ui_and_the_shared_options_to_the_app(template: str, ui: bool) -> None:
    options = _app_options(_render(template, ui=ui))
    assert options["ui"] is ui
    assert options["name"] == "shop" and options["base_path"] == "/api" and options["retention"] == "30d"
    assert options["authorize"] == "app.auth:authorize" and options["a2a_default_agent"] == "refund"


def test_every_entry_holds_the_same_registry_of_the_agents_the_build_found() -> None:
    registries = [next(line for line in _render(t).splitlines() if "'refund': (" in line) for t in ENTRIES]
    assert registries == ["    'refund': ('agents.refund', 'agent'),"] * 3


@pytest.mark.parametrize("template", ENTRIES)
def test_every_entry_passes_allowed_hosts_and_a_platform_that_routes_by_host_takes_any_by_default(
    template: str,
) -> None:
    routed_by_host = not template.startswith("server/")  # Lambda and Vercel reach a function only at its domains
    assert _app_options(_render(template))["allowed_hosts"] == (["*"] if routed_by_host else [])
    listed = ["agents.internal", ".example.com"]
    assert _app_options(_render(template, allowed_hosts=listed))["allowed_hosts"] == listed
    if routed_by_host:  # the agent units of the user's own app get the same default
        own_app = _render(template, server={"module": "app.main", "attribute": "app"})
        assert "allowed_hosts=['*']" in own_app


def test_the_cloudflare_entry_passes_allowed_hosts() -> None:
    context: dict[str, Any] = {**CLOUDFLARE, "entrypoint": "Default"}
    assert "allowed_hosts=['*']," in _render("cloudflare/src/entry.py.j2", **context)
    listed = _render("cloudflare/src/entry.py.j2", allowed_hosts=["agents.example.com"], **context)
    assert "allowed_hosts=['agents.example.com']," in listed


def test_a_server_build_with_temporal_runs_the_app_and_a_worker_or_either_alone_by_flag() -> None:
    table = {"address": "${TEMPORAL_ADDRESS}", "task_queue": "agent-unit", "namespace": "default", "heartbeat": "30s"}
    source = _render("server/main.py.j2", temporal=table)
    compile(source, "main.py", "exec")
    assert f"TEMPORAL = {table!r}" in source
    assert 'temporal_worker="--no-worker" not in sys.argv' in source
    assert 'if "--worker" in sys.argv:' in source
    plain = _render("server/main.py.j2")
    assert "TEMPORAL" not in plain and "--worker" not in plain


def _guard_options(source: str) -> dict[str, Any] | None:
    """The keywords of the ``HostGuard(app, ...)`` call, or None when the entry has none."""
    calls = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "HostGuard"
    ]
    if not calls:
        return None
    [call] = calls
    options = {keyword.arg: keyword.value for keyword in call.keywords}
    return {
        key: ast.literal_eval(value) if isinstance(value, ast.Constant | ast.List) else ast.unparse(value)
        for key, value in options.items()
    }


@pytest.mark.parametrize("template", [*ENTRIES, "cloudflare/src/entry.py.j2"])
def test_every_entry_of_your_own_app_puts_the_host_and_origin_checks_in_front_unless_host_guard_is_false(
    template: str,
) -> None:
    context = {**CLOUDFLARE, "entrypoint": "Default"} if template.startswith("cloudflare/") else {}
    own_app = {"module": "app.main", "attribute": "app"}
    source = _render(template, server=own_app, **context)
    compile(source, template, "exec")
    routed_by_host = not template.startswith("server/")  # the platform reaches it only at its own domains
    assert _guard_options(source) == {
        "public_url": "os.environ.get('AGENT_UNIT_URL') or 'https://agents.example.com'",
        "allowed_hosts": ["*"] if routed_by_host else [],
        "allowed_origins": ["https://app.example.com"],
    }
    listed = _render(template, server=own_app, allowed_hosts=["agents.internal"], **context)
    assert _guard_options(listed)["allowed_hosts"] == ["agents.internal"]  # type: ignore[index]
    off = _render(template, server=own_app, host_guard=False, **context)
    compile(off, template, "exec")
    assert _guard_options(off) is None and "host_guard = false" in off
    assert _guard_options(_render(template, **context)) is None  # agent-unit's own app checks on its routes
