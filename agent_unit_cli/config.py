"""``agent-unit.toml`` (or ``[tool.agent-unit]`` in ``pyproject.toml``), as a pydantic model.

An unknown key or a wrong type is an error that names the key and the file. ``${NAME}`` in
``storage`` expands from the environment when the app starts, so a secret never lands in a
build.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_unit._durations import parse_duration
from agent_unit._limits import Limits
from agent_unit._prices import Prices
from agent_unit._tasks import check_schedule
from agent_unit.errors import ConfigError, TaskError
from agent_unit.http.hostnames import HostNames
from agent_unit.http.origins import Origins
from agent_unit.stores import DEFAULT_STORE_PATH

__all__ = ["ENGINE_KEYS", "Cloudflare", "Config", "Server", "Storage", "Task", "Temporal", "load_config", "store_url"]


ENGINE_KEYS = {
    "storage": "the app opens its own store (create_agent_unit(store=...)); AGENT_UNIT_STORAGE names the tasks' store",
    "budget": "pass budget= to the create_agent_unit() your app mounts",
    "sweep": "the host sweeps every agent unit your app creates",
    "retention": "pass retention= to the create_agent_unit() your app mounts",
    "base_path": "your app decides its routes: mount agent-unit where you want it",
    "authorize": "pass authorize= to the create_agent_unit() your app mounts",
    "max_body_bytes": "pass max_body_bytes= to the create_agent_unit() your app mounts",
    "adapters": "pass adapters= to the create_agent_unit() your app mounts",
    "approval_timeout": "pass approval_timeout= to the create_agent_unit() your app mounts",
    "require_answerer": "pass require_answerer= to the create_agent_unit() your app mounts",
    "limits": "pass limits= to the create_agent_unit() your app mounts",
    "prices": "pass prices= to the create_agent_unit() your app mounts",
    "mcp": "your app's own dependencies decide what the build vendors",
    "engine": "pass temporal= to the create_agent_unit() your app mounts",
    "temporal": "pass temporal= to the create_agent_unit() your app mounts",
}
"""The agent-unit engine's settings, which do not apply to a ``server`` app (agent-unit adds no
engine of its own there), with why and what to do instead."""


class Task(BaseModel):
    """``[tasks.NAME]``: a portable schedule (five numeric fields, UTC) and a ``module:function``."""

    model_config = ConfigDict(extra="forbid")

    schedule: str
    handler: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$", description="module:function")

    @field_validator("schedule")
    @classmethod
    def _portable(cls, value: str) -> str:
        try:
            return check_schedule(value)
        except TaskError as exc:
            raise ValueError(exc.message) from None


class Cloudflare(BaseModel):
    """``[cloudflare]``: how the cloudflare preset runs the agents, and the user's own Worker resources."""

    model_config = ConfigDict(extra="forbid")

    runtime: Literal["durable-objects", "default"] = "durable-objects"
    """One Durable Object per run (default), or the engine over ``storage = "d1://BINDING"``."""
    exports: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w.]*$")
    """A module of the project whose classes the Worker's entry exports (their own Durable Objects)."""
    wrangler: dict[str, Any] = {}
    """``[cloudflare.wrangler]``: their D1, KV, R2, Durable Objects and flags, in wrangler's own format,
    merged into the generated wrangler.jsonc (never replacing what agent-unit writes)."""


class Temporal(BaseModel):
    """``[temporal]``: the Temporal server the runs go through (``${NAME}`` expands where the app starts)."""

    model_config = ConfigDict(extra="forbid")

    address: str = "localhost:7233"  # host:port
    namespace: str = "default"
    task_queue: str = "agent-unit"
    api_key: str | None = None  # Temporal Cloud: turns TLS on
    tls: bool | None = None
    heartbeat: str = "30s"  # a worker silent this long is replaced by another's retry
    search_attributes: bool = False  # AgentUnitAgent/Thread/Status, registered on the namespace first

    @field_validator("heartbeat")
    @classmethod
    def _duration(cls, value: str) -> str:
        parse_duration(value)
        return value


class Storage(BaseModel):
    """``storage = { provider = "postgres", url = "${DATABASE_URL}" }``: a store URL wholly from the
    environment, with its kind named apart (as Prisma's ``provider`` and ``url``), so a build on a
    machine without the production secret still knows which driver to vendor."""

    model_config = ConfigDict(extra="forbid")

    provider: Literal["memory", "sqlite", "redis", "postgres", "dynamodb", "d1"]
    url: str


APP_REFERENCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
"""``server = "module:app"``: your own ASGI app."""
PRESET_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
"""``server = "google-adk"``: a server preset, the framework's own app."""


FRAMEWORKS = "the framework's"


class Server(BaseModel):
    """``[server]``: a server preset with its own options (``preset = "google-adk"``, ``web = true``),
    which the preset checks when the build or ``dev`` uses it."""

    model_config = ConfigDict(extra="allow")

    preset: str = Field(pattern=PRESET_NAME.pattern)


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="agent-unit", pattern=r"^[A-Za-z0-9][A-Za-z0-9 _.-]*$", max_length=100)
    storage: str | Storage | None = None
    preset: str = "server"
    budget: str | None = None
    sweep: str | bool = "* * * * *"
    base_path: str = "/"
    authorize: str | None = Field(default=None, pattern=r"^[\w.]+:[\w.]+$")
    retention: str | None = None
    approval_timeout: str | None = None  # tool approvals nobody answers in this long are declined
    require_answerer: bool = False  # a resume must say who answers (authorize's identity, or request.user)
    limits: Limits | None = None  # [limits]: what each run may spend (tokens, model calls, cost), and on_limit
    prices: Prices | None = None  # [prices]: USD per million tokens per model, for costs and cost limits
    max_body_bytes: int = Field(default=1_000_000, gt=0)
    adapters: list[str] = []
    server: str | Server | None = None  # your own ASGI app ("module:app"), or a server preset's name or table
    url: str | None = Field(default=None, pattern=r"^https?://")  # the deployment's own URL (A2A card, continues)
    origin: str | None = Field(default=None, pattern=r"^https?://")  # netlify: where the agent-unit backend runs
    ui: bool = False  # serve the approvals inbox at {base_path}/ui/ in builds (always on in `dev`)
    allowed_origins: list[str] = []  # web pages (besides loopback and `url`) that may POST (MCP, runs, a server app)
    allowed_hosts: list[str] = []  # names a request's Host may be (besides url's, loopback names, addresses)
    host_guard: bool = True  # a `server` app behind agent-unit's Host and Origin checks (false: it does its own)
    a2a_default_agent: str | None = None  # the agent POST /a2a runs for a new task that names no skill
    mcp: bool | None = None  # vendor the MCP SDK into builds (default: when the project's requirements name it)
    tasks: dict[str, Task] = {}
    cloudflare: Cloudflare = Cloudflare()
    engine: Literal["native", "temporal"] | None = None  # default: temporal when [temporal] is there
    temporal: Temporal | None = None

    @property
    def temporal_table(self) -> dict[str, Any] | None:
        """The ``[temporal]`` table the app runs on (``engine = "temporal"`` alone: its defaults), or None."""
        if self.engine == "native" or (self.engine is None and self.temporal is None):
            return None
        return (self.temporal or Temporal()).model_dump(exclude_none=True)

    @property
    def storage_url(self) -> str | None:
        """The store's URL, as written (``${NAME}`` expands where the app starts)."""
        return self.storage.url if isinstance(self.storage, Storage) else self.storage

    @property
    def storage_provider(self) -> str | None:
        """The kind of store the table form names (None for a plain URL, whose scheme says it)."""
        return self.storage.provider if isinstance(self.storage, Storage) else None

    @property
    def server_app(self) -> str | None:
        """Your own app's ``"module:app"`` (a server preset's module once the build wrote it), or None."""
        return self.server if isinstance(self.server, str) and APP_REFERENCE.match(self.server) else None

    @property
    def server_preset(self) -> str | None:
        """The server preset ``server`` names (``"google-adk"``), or None for your own app or none."""
        if isinstance(self.server, Server):
            return self.server.preset
        return self.server if self.server is not None and PRESET_NAME.match(self.server) else None

    @property
    def server_options(self) -> dict[str, Any]:
        """The ``[server]`` table's keys besides ``preset``: the server preset's options."""
        return dict(self.server.model_extra or {}) if isinstance(self.server, Server) else {}

    @field_validator("server")
    @classmethod
    def _server(cls, value: str | Server | None) -> str | Server | None:
        if isinstance(value, str) and not (APP_REFERENCE.match(value) or PRESET_NAME.match(value)):
            raise ValueError(
                f"{value!r}: write 'module:app' for your own ASGI app (e.g. 'web.main:app'), "
                "or a server preset's name (e.g. 'google-adk')"
            )
        return value

    @field_validator("budget", "retention", "approval_timeout")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        Origins(None, value)  # raises ValueError naming the entry that is not an origin
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        HostNames(None, value)  # raises ValueError naming the entry that is not a host name
        return value

    @field_validator("base_path")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must start with '/'")
        return value

    @field_validator("sweep")
    @classmethod
    def _cron(cls, value: str | bool) -> str | bool:
        if value is True:
            return "* * * * *"
        if isinstance(value, str) and len(value.split()) != 5:
            raise ValueError("must be a cron expression with 5 fields (e.g. '*/5 * * * *') or false")
        return value


def _find(root: Path) -> tuple[dict[str, Any], Path | None]:
    own = root / "agent-unit.toml"
    if own.is_file():
        return _read(own), own
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        section = _read(pyproject).get("tool", {}).get("agent-unit")
        if section is not None:
            return section, pyproject
    return {}, None


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path.name} is not valid TOML: {exc}") from None


def load_config(root: str | Path = ".", **overrides: Any) -> tuple[Config, Path | None]:
    """The project's configuration and the file it came from (None: defaults only)."""
    values, source = _find(Path(root))
    values = {**values, **{key: value for key, value in overrides.items() if value is not None}}
    try:
        config = Config.model_validate(values)
    except ValidationError as exc:
        where = _where(source)
        problems = []
        for error in exc.errors(include_url=False):
            loc = error["loc"]
            if loc[0] in ("storage", "server") and len(loc) > 1:  # a string or a table: the form written's errors
                form = "Storage" if loc[0] == "storage" else "Server"
                if loc[1] != (form if isinstance(values.get(loc[0]), dict) else "str"):
                    continue
                loc = (loc[0], *loc[2:])
            key = ".".join(str(part) for part in loc)
            message = "unknown key" + _did_you_mean(loc) if error["type"] == "extra_forbidden" else error["msg"]
            if error["loc"][0] == "server":
                message = message.removeprefix("Value error, ")
            if error["loc"][0] == "tasks":  # the schedule's own message; the handler's expected form
                message = message.removeprefix("Value error, ")
                if error["type"] == "string_pattern_mismatch":
                    message = f"{error['input']!r}: write 'module:function', e.g. 'app.tasks:send_digest'"
            problems.append(f"{key}: {message}")
        raise ConfigError(f"{where}: " + "; ".join(problems)) from None
    if config.engine == "native" and config.temporal is not None:
        raise ConfigError(f'{_where(source)}: engine = "native" with a [temporal] table: remove one of them')
    if not config.host_guard and not config.server:
        raise ConfigError(
            f"{_where(source)}: host_guard = false applies to a `server` app only: agent-unit's own routes always "
            'check Host and Origin (allowed_hosts = ["*"] turns the Host check off). Remove it'
        )
    beside = [key for key in ENGINE_KEYS if config.server and key in values]
    if beside:
        reasons = "; ".join(f"{key}: {ENGINE_KEYS[key]}" for key in beside)
        raise ConfigError(
            f"{_where(source)}: server = {config.server_preset or config.server!r} serves "
            f"{FRAMEWORKS if config.server_preset else 'your'} own app, so agent-unit adds no engine and "
            f"these keys do not apply: {reasons}. Remove them"
        )
    return config, source


def _did_you_mean(loc: tuple[int | str, ...]) -> str:
    """``: did you mean storage?`` for a misspelt key (``storag``), from the keys of the table it is in."""
    tables: dict[str, type[BaseModel]] = {
        "cloudflare": Cloudflare,
        "tasks": Task,
        "storage": Storage,
        "temporal": Temporal,
        "server": Server,
        "limits": Limits,
        "prices": Prices,
    }
    table = tables.get(str(loc[0]), Config) if len(loc) > 1 else Config
    close = difflib.get_close_matches(str(loc[-1]), list(table.model_fields), n=1)
    return f": did you mean {close[0]}?" if close else ""


def _where(source: Path | None) -> str:
    if source is None:
        return "the configuration"
    if source.name == "pyproject.toml":
        return "pyproject.toml [tool.agent-unit]"
    return source.name


def store_url(root: str | Path, config: Config) -> str:
    """The storage ``dev`` and ``runs`` open: the configured one, or the SQLite file beside the project."""
    return config.storage_url or f"sqlite:///{Path(root).resolve() / DEFAULT_STORE_PATH}"
