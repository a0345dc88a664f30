"""``agent-unit runs``: list, show, resume, cancel and retry runs, in the project's store or a deployment's.

Without ``--url`` the command opens the project's configured storage (default: the SQLite
file ``dev`` uses) and, to resume, runs the agent in this process until it parks or ends.
While ``agent-unit dev`` serves that store for the project, ``resume``, ``cancel`` and ``retry`` go
through dev's HTTP API instead (:mod:`agent_unit_cli.dev_address`), so the server that
holds the timers and executions sees the change at once: a run resumed into a short sleep
wakes on time, not at dev's next sweep. With ``--url`` it goes through the deployment's HTTP
API (``agent_unit.client``), with ``--token`` as a bearer token for the deployment's ``authorize``.
"""

from __future__ import annotations

import asyncio
import builtins
import json
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from agent_unit.errors import AgentUnitError, ConfigError, Forbidden, Unauthorized
from agent_unit.stores import DEFAULT_STORE_PATH

from .config import load_config, store_url
from .dev_address import serving
from .flags import Command, Group
from .report import reported

if TYPE_CHECKING:
    from agent_unit.client import SyncAgentClient

__all__ = ["app"]

app = typer.Typer(
    cls=Group, help="List, show, resume, cancel and retry runs (the local store, or --url of a deployment)."
)
console = Console()

ROOT = typer.Option(Path("."), "--root", help="The project folder (its configured storage is used).")
URL = typer.Option(None, "--url", help="A deployment's URL: go through its HTTP API instead of the local store.")
TOKEN = typer.Option(None, "--token", envvar="AGENT_UNIT_TOKEN", help="Bearer token for --url.")
JSON = typer.Option(False, "--json", help="Print JSON.")


class Runs(Protocol):
    """Where the runs are: the local store or a deployment. Records and events are their JSON form."""

    def list(self, *, status: str | None, agent: str | None, thread_id: str | None, limit: int) -> list[dict[str, Any]]:
        """The newest runs first, as ``GET /runs`` lists them."""

    def show(self, run_id: str) -> tuple[dict[str, Any], builtins.list[dict[str, Any]]]:
        """The run and its events."""

    def resume(self, run_id: str, answer: Any) -> dict[str, Any]:
        """Answer the run's interrupt; the run once it parks or ends."""

    def cancel(self, run_id: str) -> dict[str, Any]:
        """Cancel the run; the cancelled run."""

    def retry(self, run_id: str) -> dict[str, Any]:
        """Retry the failed run from the work that failed; the run once it parks or ends."""


class Local:
    """The project's own store, through a ``RunEngine`` of this process (no sweeps, no timers);
    ``resume`` and ``cancel`` through ``agent-unit dev`` while it serves that store."""

    def __init__(self, root: Path, token: str | None = None) -> None:
        self.root = root
        self.token = token

    def _dev(self) -> Remote | None:
        """The running ``agent-unit dev`` of this project, if it serves the same store and answers."""
        try:
            config, _ = load_config(self.root)
        except ConfigError:
            return None  # reported by the store path
        url = serving(self.root, store_url(self.root, config))
        return Remote(url, self.token) if url else None

    def _through_dev(self, action: str, work: Callable[[Remote], dict[str, Any]]) -> dict[str, Any] | None:
        """``work`` done by the running dev server; ``None`` when there is none, or its ``authorize`` refuses."""
        dev = self._dev()
        if dev is None:
            return None
        try:
            return work(dev)
        except (Unauthorized, Forbidden) as exc:
            Console(stderr=True, soft_wrap=True).print(
                f"note: agent-unit dev at {dev.url} refused to {action} ({exc.message}): done through the store, "
                "so dev sees it at its next sweep; pass --token to go through dev",
                markup=False,
                highlight=False,
            )
            return None

    def _run(self, work: Callable[[Any], Coroutine[Any, Any, Any]], *, agents: bool = False) -> Any:
        from agent_unit.discovery import discover_agents
        from agent_unit.runtime import RunEngine

        config, _ = load_config(self.root)
        found = discover_agents(self.root, adapters=config.adapters) if agents else {}
        default = self.root / DEFAULT_STORE_PATH
        if config.storage is None and not default.is_file():  # never create a store by looking for runs
            raise ConfigError(
                f"no runs here: {default} does not exist (agent-unit dev creates it): "
                "use --root for the project, or --url for a deployment"
            )

        async def go() -> Any:
            options: dict[str, Any] = {
                "budget": config.budget,
                "retention": config.retention,
                "approval_timeout": config.approval_timeout,
                "limits": config.limits,
                "prices": config.prices,
            }
            try:
                if config.temporal_table is not None:  # a resume or cancel goes through the run's workflow
                    from agent_unit.temporal import TemporalEngine, temporal_settings

                    settings = temporal_settings(config.temporal_table)
                    engine: RunEngine = TemporalEngine(
                        found, store_url(self.root, config), temporal=settings, **options
                    )
                else:
                    engine = RunEngine(found, store_url(self.root, config), background_sweep=False, **options)
            except ValueError as exc:  # a store URL or driver that cannot be used
                raise ConfigError(str(exc)) from None
            try:
                await engine.check_store()
                return await work(engine)
            finally:
                await engine.aclose()

        return asyncio.run(go())

    def list(self, *, status: str | None, agent: str | None, thread_id: str | None, limit: int) -> list[dict[str, Any]]:
        async def work(engine: Any) -> list[dict[str, Any]]:
            page = await engine.list(status=status, agent=agent, thread_id=thread_id, limit=limit)
            return [record.public() for record in page.runs]

        return self._run(work)  # type: ignore[no-any-return]

    def show(self, run_id: str) -> tuple[dict[str, Any], builtins.list[dict[str, Any]]]:
        async def work(engine: Any) -> tuple[dict[str, Any], builtins.list[dict[str, Any]]]:
            record = await engine.get(run_id)
            return record.public(), [event.to_dict() for event in await engine.events(run_id)]

        return self._run(work)  # type: ignore[no-any-return]

    def resume(self, run_id: str, answer: Any) -> dict[str, Any]:
        if (done := self._through_dev("resume", lambda dev: dev.resume(run_id, answer))) is not None:
            return done

        async def work(engine: Any) -> dict[str, Any]:
            return (await engine.resume(run_id, answer, wait=True)).public()  # type: ignore[no-any-return]

        return self._run(work, agents=True)  # type: ignore[no-any-return]

    def cancel(self, run_id: str) -> dict[str, Any]:
        if (done := self._through_dev("cancel", lambda dev: dev.cancel(run_id))) is not None:
            return done

        async def work(engine: Any) -> dict[str, Any]:
            return (await engine.cancel(run_id)).public()  # type: ignore[no-any-return]

        return self._run(work)  # type: ignore[no-any-return]

    def retry(self, run_id: str) -> dict[str, Any]:
        if (done := self._through_dev("retry", lambda dev: dev.retry(run_id))) is not None:
            return done

        async def work(engine: Any) -> dict[str, Any]:
            return (await engine.retry(run_id, wait=True)).public()  # type: ignore[no-any-return]

        return self._run(work, agents=True)  # type: ignore[no-any-return]


class Remote:
    """A deployment's HTTP API, through :class:`agent_unit.client.SyncAgentClient`."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.headers = {"authorization": f"Bearer {token}"} if token else {}

    @contextmanager
    def _client(self) -> Iterator[SyncAgentClient]:
        import httpx

        from agent_unit.client import SyncAgentClient

        try:
            with SyncAgentClient(self.url, headers=self.headers) as client:
                yield client
        except httpx.HTTPError as exc:
            raise AgentUnitError(f"cannot reach {self.url}: {exc or type(exc).__name__}") from None

    def list(self, *, status: str | None, agent: str | None, thread_id: str | None, limit: int) -> list[dict[str, Any]]:
        with self._client() as client:
            page = client.list(status=status, agent=agent, thread_id=thread_id, limit=limit)
        return [record.public() for record in page.runs]

    def show(self, run_id: str) -> tuple[dict[str, Any], builtins.list[dict[str, Any]]]:
        with self._client() as client:
            record = client.get(run_id).public()
            return record, [
                {"seq": event.seq, **event.data} for event in client.events(run_id)
            ]  # until it parks or ends

    def resume(self, run_id: str, answer: Any) -> dict[str, Any]:
        with self._client() as client:
            for _ in client.resume(run_id, answer):  # the stream ends when the run parks or ends
                pass
            return client.get(run_id).public()

    def cancel(self, run_id: str) -> dict[str, Any]:
        with self._client() as client:
            return client.cancel(run_id).public()

    def retry(self, run_id: str) -> dict[str, Any]:
        with self._client() as client:
            return client.retry(run_id, wait=True).public()


def _source(root: Path, url: str | None, token: str | None) -> Runs:
    return Remote(url, token) if url else Local(root.resolve(), token)


@app.callback(invoke_without_command=True)
def list_runs(
    ctx: typer.Context,
    status: str | None = typer.Option(None, "--status", help="e.g. interrupted (the approvals inbox), failed."),
    agent: str | None = typer.Option(None, "--agent", help="Only this agent's runs."),
    thread: str | None = typer.Option(None, "--thread", help="Only this thread's runs."),
    limit: int = typer.Option(50, "--limit", min=1, max=200, help="At most this many runs (newest first)."),
    as_json: bool = JSON,
    root: Path = ROOT,
    url: str | None = URL,
    token: str | None = TOKEN,
) -> None:
    """List runs (newest first); `runs show|resume|cancel|retry ID` acts on one."""
    if ctx.invoked_subcommand is not None:
        return
    with reported():
        found = _source(root, url, token).list(status=status, agent=agent, thread_id=thread, limit=limit)
    if as_json:
        print(json.dumps(found))
        return
    if not found:
        console.print("no runs", markup=False)
        return
    table = Table(Column("id", no_wrap=True), "agent", "status", "waiting for")  # runs show ID: the rest
    for run in found:
        waiting = (run.get("interrupt") or {}).get("name") or (f"wake {run['wake_at']}" if run.get("wake_at") else "")
        table.add_row(*(escape(str(value)) for value in (run["id"], run["agent"], run["status"], waiting)))
    console.print(table)


@app.command(cls=Command)
def show(
    run_id: str = typer.Argument(..., help="The run's id."),
    as_json: bool = JSON,
    root: Path = ROOT,
    url: str | None = URL,
    token: str | None = TOKEN,
) -> None:
    """Print a run and its events (with --url, a live run's events up to where it parks or ends)."""
    with reported():
        record, events = _source(root, url, token).show(run_id)
    if as_json:
        print(json.dumps({"run": record, "events": events}))
        return
    _print_run(record)
    table = Table("seq", "event", "detail")
    for event in events:
        detail = {key: value for key, value in event.items() if key not in ("seq", "type", "runId", "threadId")}
        table.add_row(str(event["seq"]), escape(event.get("type", "")), escape(_short(detail)))
    console.print(table)


@app.command(cls=Command)
def resume(
    run_id: str = typer.Argument(..., help="The interrupted run's id."),
    answer: str = typer.Argument(..., help="The answer, as JSON: true, '{\"approved\": true}', '\"text\"'."),
    as_json: bool = JSON,
    root: Path = ROOT,
    url: str | None = URL,
    token: str | None = TOKEN,
) -> None:
    """Answer an interrupted run and let it go on until it parks or ends."""
    try:
        value = json.loads(answer)
    except ValueError:
        example = """'{"approved": true}'"""
        raise typer.BadParameter(f"{answer!r} is not JSON: write true, 42, '\"text\"' or {example}") from None
    with reported():
        record = _source(root, url, token).resume(run_id, value)
    _print_result(record, as_json)


@app.command(cls=Command)
def cancel(
    run_id: str = typer.Argument(..., help="The run's id."),
    as_json: bool = JSON,
    root: Path = ROOT,
    url: str | None = URL,
    token: str | None = TOKEN,
) -> None:
    """Cancel a queued, running, interrupted or sleeping run."""
    with reported():
        record = _source(root, url, token).cancel(run_id)
    _print_result(record, as_json)


@app.command(cls=Command)
def retry(
    run_id: str = typer.Argument(..., help="The failed run's id."),
    as_json: bool = JSON,
    root: Path = ROOT,
    url: str | None = URL,
    token: str | None = TOKEN,
) -> None:
    """Retry a failed run from the step that failed, with the agent code deployed now."""
    with reported():
        record = _source(root, url, token).retry(run_id)
    _print_result(record, as_json)


def _print_result(record: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(record))
    else:
        _print_run(record)


def _print_run(record: dict[str, Any]) -> None:
    table = Table(show_header=False, box=None)
    for key in ("id", "agent", "status", "thread_id", "attempt", "created_at", "updated_at"):
        if record.get(key) is not None:
            table.add_row(key, escape(str(record[key])))
    for key in ("input", "output", "error", "interrupt", "wake_at"):
        if record.get(key) is not None:
            table.add_row(key, escape(_short(record[key], 400)))
    console.print(table)


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
