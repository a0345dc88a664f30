"""``netlify``: the project's static site, with the agent routes proxied to a backend elsewhere.

Netlify Functions run JavaScript, TypeScript, Go and Rust, not Python, so no agent runs on
Netlify and this preset does not pretend otherwise. It publishes what Netlify can host, the
static files, and rules that proxy every agent route (status 200, forced, so a static file
never shadows one) to the agent-unit backend deployed with another preset: ``--origin URL``
or ``origin`` in the configuration. The build refuses without one.

The static files follow one rule: ``public/`` is published as it is; an index page listing
the agents is added when ``public/index.html`` does not exist.

The rules are written twice from one list, because Netlify reads each file in a different
case: ``netlify.toml`` is read from the folder the Netlify CLI runs in (not from
``--dir``), ``_redirects`` from the published folder wherever the CLI runs, and before
``netlify.toml``. So ``netlify deploy --dir .output/netlify`` from the project applies
them. A ``public/_redirects`` (a single-page app's ``/* /index.html 200``, say) goes into
``_redirects`` after them, so it cannot shadow an agent route; ``netlify.toml`` then holds
no rules, since Netlify keeps the last of two equal rules and would move the app's ahead.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

from agent_unit.http.routes import public_routes

from . import BuildOptions, Finish, Preset

__all__ = ["PROXY_TIMEOUT_SECONDS", "Rule", "proxied_paths", "rules"]

PROXY_TIMEOUT_SECONDS = 26
"""Netlify ends a proxied request after this long (its documented limit for rewrites)."""

PUBLIC = "public"
"""The project's folder of static files, published as it is."""

AGENT_CARDS = ("/.well-known/agent.json", "/.well-known/agent-card.json")
"""A2A clients look for the card at the site's root, whatever the base path."""

NO_ORIGIN = (
    "the netlify preset needs the URL of an agent-unit backend: Netlify cannot run Python (its functions run "
    "JavaScript, TypeScript, Go and Rust), so the agents run elsewhere and the site proxies their routes there. "
    "Deploy the backend with `agent-unit build --preset docker`, `--preset aws-lambda` or `--preset vercel`, "
    "then pass its URL: `agent-unit build --preset netlify --origin https://...` "
    'or origin = "https://..." in agent-unit.toml'
)


@dataclass(frozen=True)
class Rule:
    """One proxy rule: requests to ``source`` on the site go to ``target`` on the backend."""

    source: str
    target: str


def _netlify_path(route: str) -> str:
    """``/runs/{id}/events`` as Netlify writes it: ``/runs/:id/events`` (a placeholder matches one segment)."""
    return re.sub(r"\{(\w+)\}", r":\1", route)


def proxied_paths(base_path: str, *, ui: bool = False) -> list[str]:
    """Every path the backend serves to the public, in the route table's order, once each.

    The routes come from the table the app is built from, so a route added there is proxied
    without a change here. The internal ``/__agent-unit/*`` routes are left out on purpose:
    only the backend's own scheduler calls them. ``POST /mcp`` is proxied whether or not the
    backend serves it (without the MCP SDK it answers what to install).
    """
    prefix = base_path.rstrip("/")
    # one rule per path, whatever its placeholders are called: Netlify matches /ui and /ui/ alike
    unique: dict[str, str] = {}
    for route in public_routes(mcp=True, ui=ui):
        path = _netlify_path(prefix + route.path)
        unique.setdefault(re.sub(r":\w+", ":_", path).rstrip("/") or "/", path)
    return list(unique.values())


def rules(origin: str, base_path: str, *, ui: bool = False) -> list[Rule]:
    """The proxy rules for a backend at ``origin``, which serves the agents under ``base_path`` too
    (and the approvals inbox with ``ui``)."""
    origin = origin.rstrip("/")
    found = [Rule(path, origin + path) for path in proxied_paths(base_path, ui=ui)]
    prefix = base_path.rstrip("/")
    if prefix:
        found += [Rule(card, origin + prefix + card) for card in AGENT_CARDS]
    return found


def origin_of(config: Any, options: BuildOptions) -> str:
    """The backend's URL (``--origin`` first, then the configuration's), checked; ValueError says why not."""
    origin = options.origin or config.origin
    if not origin:
        raise ValueError(NO_ORIGIN)
    problem = _origin_problem(origin)
    if problem:
        shown = re.sub(r"//[^/@]*@", "//***@", origin)  # a password is not echoed back
        raise ValueError(f"origin {shown!r} {problem}")
    return origin.rstrip("/")


def _origin_problem(origin: str) -> str | None:
    if any(char.isspace() or char in "\"'<>\\`" for char in origin):
        return "has a space or a quote: give the backend's URL as it is, like https://agents.example.com"
    try:
        parts = urlsplit(origin)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return "is not a URL: give the backend's URL, like https://agents.example.com"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an http(s) URL with a host: give the backend's URL, like https://agents.example.com"
    if parts.username is not None or parts.password is not None:
        return "carries credentials, and netlify.toml is published with the site: use authorize in the backend"
    if parts.query or parts.fragment or origin.endswith(("?", "#")):
        return "has a query or a fragment: give the backend's root URL, the base path is added to it"
    return None


def _check(config: Any, options: BuildOptions) -> None:
    origin_of(config, options)


def _context(config: Any, options: BuildOptions) -> dict[str, Any]:
    origin = origin_of(config, options)
    # server = "module:app": the backend is the user's own app, whose routes only it knows: every path goes there
    proxied = [Rule("/*", origin + "/:splat")] if config.server else rules(origin, config.base_path, ui=config.ui)
    return {
        "netlify": {
            "origin": origin,
            "redirects": proxied,
            "manifest": config.base_path.rstrip("/") + "/agents",
            "timeout": PROXY_TIMEOUT_SECONDS,
            "public_redirects": False,  # finish renders netlify.toml again when public/_redirects exists
        }
    }


def _redirects_file(proxied: list[Rule], theirs: str | None) -> str:
    """``_redirects``: the proxy rules first (``200!`` is status 200, forced), then ``public/_redirects``."""
    lines = ["# Written by agent-unit build (netlify preset): the agent routes, proxied to the backend."]
    lines += [f"{rule.source}  {rule.target}  200!" for rule in proxied]
    if theirs is not None:
        lines += ["", "# public/_redirects, after the agent routes so that none of its rules shadows them.", theirs]
    return "\n".join(lines).rstrip("\n") + "\n"


def _finish(finish: Finish) -> list[str]:
    """Publish ``public/`` over the rendered files, then write ``_redirects``; the files this added."""
    public = finish.root / PUBLIC
    theirs = None
    added: list[str] = []
    if public.is_dir():
        if (public / "netlify.toml").exists():
            _refuse(
                finish.output,
                "public/netlify.toml would replace the netlify.toml this build writes: move its redirects to "
                "public/_redirects and its headers to public/_headers (both are published, after the agent routes)",
            )
        redirects = public / "_redirects"
        theirs = redirects.read_text() if redirects.is_file() else None
        present = {path.name for path in finish.output.iterdir()}
        finish.progress("copying public/")
        shutil.copytree(
            public, finish.output, dirs_exist_ok=True, ignore=lambda folder, _: _top_redirects(public, folder)
        )
        added = [
            path.name + ("/" if path.is_dir() else "")
            for path in sorted(public.iterdir())
            if path.name not in present and path.name != "_redirects"
        ]
    (finish.output / "_redirects").write_text(_redirects_file(finish.context["netlify"]["redirects"], theirs))
    if theirs is not None:
        context = finish.context | {"netlify": finish.context["netlify"] | {"public_redirects": True}}
        (finish.output / "netlify.toml").write_text(_render("netlify/netlify.toml.j2", context))
    return ["_redirects", *added]


def _render(template: str, context: dict[str, Any]) -> str:
    """One of this preset's templates, rendered as the build renders them."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    templates = Environment(
        loader=PackageLoader("agent_unit_cli", "templates"), undefined=StrictUndefined, keep_trailing_newline=True
    )
    return templates.get_template(template).render(**context)


def _top_redirects(public: Path, folder: str) -> list[str]:
    """Copy all of ``public/`` but its top-level ``_redirects``, which ``_redirects_file`` merges instead."""
    return ["_redirects"] if Path(folder) == public else []


def _refuse(output: Path, message: str) -> NoReturn:
    """Stop the build from ``finish``: mark the half-written folder as a build's, so the next build may replace it."""
    from agent_unit.errors import BuildError

    from ..build import MARKER

    (output / MARKER).write_text("written by agent-unit build: the next build replaces this folder\n")
    raise BuildError(message)


preset = Preset(
    name="netlify",
    description="The static site (public/) with the agent routes proxied to an agent-unit backend elsewhere.",
    output=".output/netlify",
    runs_on="Netlify (static files and proxy rules; the agents run at --origin)",
    storage="none here: the backend at --origin keeps the runs",
    templates=("netlify",),
    run="netlify deploy --dir {output} --no-build --prod",
    python_app=False,
    check=_check,
    context=_context,
    finish=_finish,
    unscheduled=(
        "unless the backend runs them on their schedules (build it with --preset server, docker, aws-lambda or vercel)"
    ),
    server_note=(
        "server = {server}: Netlify runs no Python, so this site's proxy fronts your app as the backend "
        "at the origin: every request goes there"
    ),
    notes=(
        "Netlify runs no Python: the agents run on the backend at the origin (built with --preset docker, "
        "aws-lambda or vercel); this site proxies their routes there.",
        f"Netlify's proxy ends a request after {PROXY_TIMEOUT_SECONDS} s: an event stream ends there and the client "
        "resumes it from Last-Event-ID (agent-unit's client does). Start long runs with a stream or a 202, "
        "not ?wait=1.",
        "Set AGENT_UNIT_URL on the backend to this site's URL, so the A2A card names the site; /__agent-unit/* is not "
        "proxied (the backend's scheduler calls it).",
        "public/ is published as it is, its _redirects after the agent routes; without public/index.html, an index "
        "page lists the agents.",
        "netlify deploy needs the site: run `netlify link` in the project once, or set NETLIFY_SITE_ID "
        "(and NETLIFY_AUTH_TOKEN in CI).",
    ),
)
