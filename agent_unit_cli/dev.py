"""``agent-unit dev``: serve ``agents/`` and restart the server when the project changes.

The app is created and its store reached once in the command's own process first
(:func:`check`), so a startup failure is one message and a non-zero exit, not a traceback
followed by a reloader waiting forever. The server then runs in a worker process that
``watchfiles`` restarts on change and stops (SIGINT, then SIGKILL) when ``dev`` stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
import watchfiles
from rich.console import Console

from agent_unit import create_agent_unit
from agent_unit._tasks import tasks_from_config
from agent_unit.discovery import discover_project
from agent_unit.errors import AgentBroken, AgentUnitError, ConfigError
from agent_unit.http import AgentUnit, HostGuard

from .config import load_config, store_url
from .dev_address import connect_url, forget, record
from .presets import PRESETS
from .server_presets import generate
from .servers import load_server

__all__ = ["ProjectFilter", "broken_agents", "check", "check_port", "create_app", "log_config", "serve", "watch"]

IGNORED = frozenset({"__pycache__", "node_modules", "venv", "site-packages"})
"""Folders whose changes never restart ``dev``, besides hidden ones (``.output``, ``.agent-unit``,
``.vercel``, ``.venv``, ``.git``) and virtual environments of any name."""


def create_app(root: Path, *, public_url: str | None = None) -> Any:
    """The app ``dev`` serves; a mistake in the project raises ``ConfigError`` or an ``AgentUnitError``.

    With ``server = "module:app"`` that is the user's own app, imported from the project, with
    the in-process scheduler of its tasks (claimed in the project's store) and its
    ``wait_until`` work, behind agent-unit's Host and Origin checks (unless ``host_guard = false``),
    as the server preset runs it; ``agents/`` is not scanned.

    An agent file that does not import (or defines no agent) does not stop the others: it is
    served as broken (``app.engine.broken``: 503 on its routes, listed in ``GET /agents``)
    until an edit fixes it.
    """
    config, _ = load_config(root)
    if config.server:
        from agent_unit.hosts.server import serve as serve_app

        reference, generated, origins = config.server_app, None, list(config.allowed_origins)
        if config.server_preset is not None:  # the framework's own app, as the server preset builds it
            try:
                made = generate(config.server_preset, config.server_options, root.resolve(), PRESETS["server"])
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
            reference, generated = made.reference, made.folder
            origins += made.allowed_origins  # the pages its CORS lets call
        assert reference is not None  # a "module:app" or a server preset's: the configuration checked it
        app = load_server(reference, root, generated)
        if config.host_guard:  # Host and Origin checked as on agent-unit's own routes (as a build does)
            app = HostGuard(
                app,
                public_url=public_url,  # as agent-unit's own app in dev
                allowed_hosts=config.allowed_hosts,
                allowed_origins=origins,
            )
        tasks = tasks_from_config(config.tasks, root=root.resolve())
        return serve_app(app, tasks=tasks, store=store_url(root, config) if tasks else None)
    found = discover_project(root, adapters=config.adapters)
    try:
        return create_agent_unit(
            found.agents,
            broken=found.broken,
            store=store_url(root, config),
            name=config.name,
            base_path=config.base_path,
            authorize=config.authorize,
            max_body_bytes=config.max_body_bytes,
            allowed_origins=config.allowed_origins,
            allowed_hosts=config.allowed_hosts,
            a2a_default_agent=config.a2a_default_agent,
            budget=config.budget,
            retention=config.retention,
            approval_timeout=config.approval_timeout,
            require_answerer=config.require_answerer,
            limits=config.limits,
            prices=config.prices,
            public_url=public_url,
            ui=True,  # the approvals inbox, always on in development
            tasks=tasks_from_config(config.tasks, root=root.resolve()),  # the in-process scheduler runs them
            temporal=config.temporal_table,  # [temporal]: runs go through Temporal, with a worker in this process
        )
    except ValueError as exc:  # a store URL, driver or authorize hook that cannot be used
        raise ConfigError(str(exc)) from None


def broken_agents(app: Any) -> dict[str, AgentBroken]:
    """The agents of ``app`` whose file does not load (none for the user's own app)."""
    return dict(app.engine.broken) if isinstance(app, AgentUnit) else {}


def check(app: Any) -> None:
    """Reach the app's store once and close it: what the server's startup would do (an agent-unit app's)."""
    if not isinstance(app, AgentUnit):
        return  # the user's own app: importing it was the check

    async def reach() -> None:
        try:
            await app.engine.check_store()
        finally:
            await app.engine.aclose()

    asyncio.run(reach())


def check_port(host: str, port: int) -> None:
    """Bind the address once: a port in use is one message now, not a worker failing in a loop."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds it
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {host}:{port} ({exc.strerror}): stop what uses it or choose another --port"
            ) from None


def log_config(level: str) -> dict[str, Any]:
    """uvicorn's logging (with its access log), plus the ``agent_unit`` logger: failed runs, recoveries."""
    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = {**LOGGING_CONFIG, "loggers": dict(LOGGING_CONFIG["loggers"])}
    config["loggers"]["agent_unit"] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return config


class ProjectFilter:
    """The changes that restart ``dev``: the project's Python files and its configuration.

    Only the part of a path inside the project counts, so a project that itself lives under
    a folder named ``venv`` still reloads. Hidden folders, :data:`IGNORED` and any folder with
    a ``pyvenv.cfg`` (a virtual environment, whatever its name) are never followed.
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def __call__(self, change: watchfiles.Change, path: str) -> bool:
        file = Path(path)
        if not (file.suffix == ".py" or file.name in ("agent-unit.toml", "pyproject.toml")):
            return False
        try:
            parts = file.relative_to(self.root).parts
        except ValueError:
            return False
        folders = parts[:-1]
        if file.name.startswith(".") or any(part.startswith(".") or part in IGNORED for part in folders):
            return False
        return not any(
            (self.root.joinpath(*folders[: depth + 1]) / "pyvenv.cfg").exists() for depth in range(len(folders))
        )


def serve(root: str, host: str, port: int, log_level: str, public_url: str, parent: int | None = None) -> None:
    """Run the server in this process until it is stopped (the worker ``watch`` restarts).

    ``parent``: the pid of the ``dev`` that started this worker; the worker stops when that
    process is gone, even if it was killed without stopping it (SIGKILL, a crash).
    """
    if parent is not None:
        _stop_with(parent)

    errors = Console(stderr=True, soft_wrap=True)
    try:
        app = create_app(Path(root), public_url=public_url)
    except (ConfigError, AgentUnitError) as exc:  # an edit broke the project: wait for the next one
        errors.print(f"error: {exc}", markup=False, highlight=False)
        raise SystemExit(1) from None
    for name, broken in sorted(broken_agents(app).items()):  # said once, by the process that serves
        errors.print(
            f"error: {broken}; agent {name!r} answers 503 until the file is fixed", markup=False, highlight=False
        )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=log_config(log_level),
        log_level=log_level,
        timeout_graceful_shutdown=3,  # an open event stream must not keep a restart waiting
    )
    address = None
    if isinstance(app, AgentUnit):  # `runs resume` and `runs cancel` come here while it serves
        project, _ = load_config(Path(root))
        address = (connect_url(host, port, project.base_path), store_url(Path(root), project))
    server = _Server(config, f"http://{host}:{port}", Path(root), address)
    try:
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: uvicorn has shut down (as uvicorn.run does)
            server.run()
    finally:
        forget(Path(root))


class _Server(uvicorn.Server):
    """uvicorn's server, saying ``serving on URL`` once it listens (never before, never after a failure),
    and recording its address for ``agent-unit runs`` (:mod:`agent_unit_cli.dev_address`) while it does."""

    def __init__(self, config: uvicorn.Config, url: str, root: Path, address: tuple[str, str] | None) -> None:
        super().__init__(config)
        self.url, self.root, self.address = url, root, address

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            if self.address is not None:
                record(self.root, *self.address)
            Console().print(f"serving on {self.url}", markup=False, highlight=False)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        forget(self.root)  # first: a resume must not come here while the server closes
        await super().shutdown(sockets)


def _stop_with(parent: int) -> None:
    """SIGTERM this process (uvicorn then shuts down) once ``parent`` is no longer its parent."""

    def wait() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)  # one cheap system call; a killed dev's worker is gone within a second
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait, name="agent-unit dev: stop with dev", daemon=True).start()


def watch(root: Path, host: str, port: int, log_level: str, public_url: str) -> None:
    """Serve in a worker process and restart it when the project changes, until Ctrl-C or SIGTERM."""
    logging.getLogger("watchfiles").setLevel(logging.ERROR)  # we say what changed ourselves

    def changed(changes: set[tuple[watchfiles.Change, str]]) -> None:
        names = sorted({os.path.relpath(path, root) for _, path in changes})
        Console().print(f"reloading: {', '.join(names)} changed", markup=False, highlight=False)

    # Ctrl-C, or SIGTERM (watchfiles turns it into one): the worker is stopped before this returns.
    with contextlib.suppress(KeyboardInterrupt):
        watchfiles.run_process(
            root,
            target=serve,
            args=(str(root), host, port, log_level, public_url, os.getpid()),
            watch_filter=ProjectFilter(root),
            callback=changed,
            sigint_timeout=5,
        )
