"""``server = "google-adk"``: Google ADK's own FastAPI app (what ``adk api_server`` and ``adk web``
serve) over the project's ADK agents folder, on every host.

Its session, artifact and memory services come from ``[server]`` with ADK's own URIs. Left
unset on a server or container, the sessions are a SQLite file and the artifacts files in the
working directory's ``.agent-unit/``, beside agent-unit's own store (the folder a Docker image
can write, where a volume keeps them). A serverless host keeps no file between invocations, so
there the sessions need a database URL and an in-memory or local-file service is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from agent_unit.http.origins import origin_of

from ..presets import Preset

__all__ = ["AGENTS", "MODULE", "Options", "server"]

AGENTS = "agents"
"""The ADK agents folder at the project's root (``adk api_server agents``): one package per agent."""
MODULE = "agent_unit_google_adk"
"""The module the build writes beside the project's modules; its ``app`` is ADK's app."""

LOCAL = ("memory", "sqlite", "file")
"""Services kept in the instance's memory or its files: lost where each invocation is a new one."""

LOCAL_DEFAULTS = {
    "session_service_uri": "sqlite:///{state}/adk-sessions.db",
    "artifact_service_uri": "file://{state}/adk-artifacts",
}
"""On a server or container, unset services are files beside agent-unit's own store, in the working
directory's ``.agent-unit/``: a Docker image's writable folder, where a volume keeps them."""

DRIVERS = {"psycopg": "psycopg[binary]", "asyncpg": "asyncpg", "aiomysql": "aiomysql", "aiosqlite": "aiosqlite"}
"""The driver a SQLAlchemy URL names (``postgresql+psycopg://``), by the name after the ``+``."""

VARIABLE = r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}"
"""``${NAME}`` in a service URI: a secret read where the app runs."""
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class Options(BaseModel):
    """``[server]``'s keys for ``preset = "google-adk"``: ADK's own service URIs and switches."""

    model_config = ConfigDict(extra="forbid")

    session_service_uri: str | None = None
    artifact_service_uri: str | None = None
    memory_service_uri: str | None = None
    web: bool = False  # ADK's dev UI at /dev-ui/
    allow_origins: list[str] = []


def options(values: Mapping[str, Any]) -> Options:
    try:
        return Options.model_validate(dict(values))
    except ValidationError as exc:
        problems = "; ".join(
            f"server.{'.'.join(str(part) for part in error['loc'])}: "
            + ("unknown key for google-adk" if error["type"] == "extra_forbidden" else error["msg"])
            for error in exc.errors(include_url=False)
        )
        raise ValueError(
            f"{problems} (google-adk takes session_service_uri, artifact_service_uri, "
            "memory_service_uri, web, allow_origins)"
        ) from None


def scheme(uri: str) -> str | None:
    """The URI's scheme (``postgresql+psycopg``), or None when ``${NAME}`` hides it."""
    found = _SCHEME.match(uri)
    return found.group(1).lower() if found else None


def _refuse_local(chosen: Options, preset: Preset) -> None:
    sessions = chosen.session_service_uri
    if sessions is None or (scheme(sessions) or "").split("+")[0] in LOCAL:
        what = "not set" if sessions is None else f"{sessions!r}"
        raise ValueError(
            f"server.session_service_uri is {what}: {preset.name} keeps no file or memory between invocations, "
            "so ADK's sessions need a database: "
            'session_service_uri = "postgresql+psycopg://user:${PASSWORD}@host/db" '
            "(or mysql+aiomysql://..., agentengine://...)"
        )
    for key in ("artifact_service_uri", "memory_service_uri"):
        uri = getattr(chosen, key)
        if uri is not None and (scheme(uri) or "").split("+")[0] in LOCAL:
            raise ValueError(
                f"server.{key} = {uri!r}: {preset.name} keeps no file or memory between invocations: "
                + (
                    "use gs://BUCKET, or leave it out"
                    if key == "artifact_service_uri"
                    else "use rag:// or agentengine://, or leave it out"
                )
            )


def _refuse_pyodide(preset: Preset) -> None:
    """A Python Worker has no threads and no TCP sockets: ADK's session services need one or the other."""
    if "pyodide" not in preset.host_modules:
        return
    from ..presets.cloudflare import compiled_dependencies

    compiled = ", ".join(sorted(compiled_dependencies(["google-adk"])))
    raise ValueError(
        f"server = 'google-adk' cannot run on {preset.name} (Python on Pyodide): ADK's session services need "
        "aiosqlite (a thread per connection) or a database driver over TCP (psycopg, asyncpg), which a Worker "
        f"does not have, and google-adk needs compiled packages ({compiled}): "
        "build with --preset server, docker, aws-lambda or vercel"
    )


class GoogleAdk:
    """The server preset: the module it writes calls ``get_fast_api_app`` as ``adk api_server`` does."""

    name = "google-adk"
    note = (
        "server = 'google-adk': the build serves Google ADK's own app (every `adk api_server` route) over "
        "the agents folder; agent-unit adds no engine, routes or storage"
    )

    def entry(self, root: Path, gen_dir: Path, preset: Preset, options: Mapping[str, Any]) -> str:
        _refuse_pyodide(preset)
        chosen = globals()["options"](options)
        if not (root / AGENTS).is_dir():
            raise ValueError(
                f"server = 'google-adk' serves the ADK agents in {AGENTS}/, which the project does not have: "
                f"add {AGENTS}/<agent>/agent.py with root_agent (`adk create {AGENTS}/<agent>` writes one)"
            )
        if preset.serverless:
            _refuse_local(chosen, preset)
        (gen_dir / f"{MODULE}.py").write_text(_module(chosen, serverless=preset.serverless))
        return f"{MODULE}:app"

    def requirements(self, options: Mapping[str, Any]) -> list[str]:
        """google-adk, and the SQLAlchemy driver its session URL names (``postgresql+psycopg``)."""
        chosen = globals()["options"](options)
        found = ["google-adk"]
        sessions = scheme(chosen.session_service_uri or "") or ""
        if sessions in ("postgresql", "mysql") or "+" in sessions:
            found.append("sqlalchemy[asyncio]")  # the async engine ADK uses needs greenlet
            driver = sessions.partition("+")[2]
            found += [DRIVERS[driver]] if driver in DRIVERS else []
        return found

    def allowed_origins(self, options: Mapping[str, Any]) -> list[str]:
        """The pages ADK's CORS lets call (``allow_origins``): agent-unit's Origin check in front
        lets them too. ``"*"`` and ``regex:`` entries name no one page: list those in ``allowed_origins``."""
        chosen = globals()["options"](options)
        found = [origin_of(entry) for entry in chosen.allow_origins if not entry.startswith("regex:")]
        return [origin for origin in found if origin is not None]


def _module(chosen: Options, *, serverless: bool) -> str:
    uris = {key: getattr(chosen, key) for key in ("session_service_uri", "artifact_service_uri", "memory_service_uri")}
    defaults = {} if serverless else LOCAL_DEFAULTS
    return f'''"""Google ADK's own app over the ADK agents in {AGENTS}/: written by agent-unit build.

Do not edit: rebuild.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from google.adk.cli.fast_api import get_fast_api_app

from agent_unit.stores import expand

AGENTS = {AGENTS!r}
SERVICES = {uris!r}  # ADK's service URIs; ${{NAME}} expands from the environment where the app runs
DEFAULTS = {defaults!r}  # where an unset one is kept: files in the working directory


def agents_dir() -> str:
    """The agents folder beside the project's modules: the first entry of sys.path that has it."""
    for entry in sys.path:
        folder = Path(entry or ".") / AGENTS
        if folder.is_dir():
            return str(folder.resolve())
    raise RuntimeError(f"no {{AGENTS}}/ folder beside the app's modules: rebuild")


def create() -> Any:
    """ADK's app, as `adk api_server {AGENTS}` makes it, with the services configured."""
    services = {{key: None if value is None else expand(value) for key, value in SERVICES.items()}}
    state = Path.cwd() / ".agent-unit"  # where agent-unit keeps its own SQLite store (a container's volume)
    for key, default in DEFAULTS.items():
        if services[key] is None:
            state.mkdir(exist_ok=True)
            services[key] = default.format(state=state.as_posix())
    return get_fast_api_app(
        agents_dir=agents_dir(),
        **services,
        use_local_storage={not serverless!r},  # a serverless host's files do not outlive the invocation
        allow_origins={chosen.allow_origins!r},
        web={chosen.web!r},
    )


class App:
    """ADK's app, made now, or at the first event where a secret its URIs name is not set here
    (a build's machine has no production secrets): then where it runs, which has them."""

    def __init__(self) -> None:
        needed = re.findall({VARIABLE!r}, " ".join(filter(None, SERVICES.values())))
        self.made = create() if all(name in os.environ for name in needed) else None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.made is None:
            self.made = create()
        await self.made(scope, receive, send)


app = App()
'''


server = GoogleAdk()
