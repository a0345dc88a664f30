"""``agent-unit``: the command line."""

from __future__ import annotations

import json
import os
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agent_unit import __version__
from agent_unit.discovery import discover_agents
from agent_unit.errors import ConfigError

from . import runs, tasks
from .build import build, routes
from .config import Config, load_config, store_url
from .flags import Command, Group
from .frameworks import Framework
from .presets import PRESETS, BuildOptions
from .presets import presets as installed_presets
from .report import fail, reported
from .server_presets import server_presets

app = typer.Typer(
    cls=Group,
    help="Durable runs for any Python agent framework, on any host.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # a bug of ours must not print the user's secrets
)
console = Console()

app.add_typer(runs.app, name="runs")

ROOT = typer.Option(Path("."), "--root", help="The project folder (holds agents/).")


def _version(value: bool) -> None:
    if value:
        console.print(f"agent-unit {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Durable runs for any Python agent framework, on any host."""


@app.command(cls=Command)
def agents(root: Path = ROOT) -> None:
    """List the agents found in agents/."""
    with reported():
        config, _ = load_config(root)
        found = discover_agents(root, adapters=config.adapters)
    table = Table("agent", "framework", "description")
    for name, agent in sorted(found.items()):
        table.add_row(escape(name), escape(agent.framework), escape(_first_line(agent.description)))
    console.print(table)


def _served(config: Config) -> str:
    """What ``dev`` serves instead of agents/: your app, or a server preset's."""
    if config.server_preset is not None:
        return f"the {config.server_preset} server"
    return f"your app {config.server_app}"


def _first_line(text: str | None) -> str:
    return text.splitlines()[0] if text else ""


@app.command(cls=Command)
def presets() -> None:
    """List the build presets and what each needs."""
    try:
        found, servers = installed_presets(), server_presets()
    except ValueError as exc:  # an installed preset that does not load: named, no traceback
        raise fail(str(exc)) from None
    table = Table("preset", "output", "runs on", "storage")
    for preset in found.values():
        table.add_row(*(escape(text) for text in (preset.name, preset.output, preset.runs_on, preset.storage)))
    console.print(table)
    console.print(f"server presets (server = NAME): {', '.join(sorted(servers))}", markup=False, highlight=False)


class LogLevel(StrEnum):
    """uvicorn's levels, for the access log and the `agent_unit` logger."""

    critical = "critical"
    error = "error"
    warning = "warning"
    info = "info"
    debug = "debug"


@app.command(cls=Command)
def dev(
    root: Path = ROOT,
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(3000, help="Port to listen on."),
    reload: bool = typer.Option(True, help="Restart when a file changes."),
    log_level: LogLevel = typer.Option(
        LogLevel.info, "--log-level", help="info shows an access log; failed runs are logged at error."
    ),
    check: bool = typer.Option(False, "--check", help="Start the app, reach its store, and exit (for CI)."),
) -> None:
    """Serve agents/ at http://localhost:3000, reloading on change."""
    from agent_unit.http.a2a import listen_url

    from . import dev as serving

    root = root.resolve()
    with reported():
        config, source = load_config(root)
        public_url = os.environ.get("AGENT_UNIT_URL") or config.url or listen_url(host, port, note=False)
        served = serving.create_app(root, public_url=public_url)
        if check and (broken := serving.broken_agents(served)):  # CI: every agent must load
            raise ConfigError(str(next(iter(broken.values()))))
        serving.check(served)  # the startup the server will do: a failure is one message here, and exit 1
        serving.check_port(host, port)
    if config.server:
        console.print(
            f"[bold]agent-unit {__version__}[/bold] dev: {escape(_served(config))} from {escape(str(root))}",
            soft_wrap=True,
        )
        for name, task in sorted(config.tasks.items()):
            console.print(f"  task {name} ({task.schedule} UTC, {task.handler})", markup=False, highlight=False)
    else:
        _dev_banner(served, config, source, root, host, port)
    if check:
        console.print("the app starts" + ("" if config.server else " and its store answers"), markup=False)
    elif reload:
        serving.watch(root, host, port, log_level.value, public_url)
    else:
        serving.serve(str(root), host, port, log_level.value, public_url)


def _dev_banner(served: Any, config: Config, source: Path | None, root: Path, host: str, port: int) -> None:
    """What ``dev`` serves of agents/: the agents, their routes, the store and the inbox."""
    agents = served.engine.agents
    console.print(
        f"[bold]agent-unit {__version__}[/bold] dev: {len(agents)} agent(s) from {escape(str(root))}/agents",
        soft_wrap=True,
    )
    for name, agent in sorted(agents.items()):
        console.print(f"  [cyan]{escape(name)}[/cyan]  {escape(_first_line(agent.description))}")
    for name, broken in sorted(served.engine.broken.items()):
        where = f"{broken.details['file']}" + (f":{broken.details['line']}" if broken.details["line"] else "")
        console.print(f"  [red]{escape(name)}[/red]  broken ({escape(where)}): its routes answer 503 until it is fixed")
    for route in routes(config.base_path):
        console.print(f"  {route}", highlight=False, markup=False)
    console.print(f"storage: {store_url(root, config)}; config: {source or 'defaults'}", markup=False, soft_wrap=True)
    if (temporal := config.temporal_table) is not None:
        console.print(
            f"engine: Temporal at {temporal['address']}, task queue {temporal['task_queue']} (a worker runs in dev)",
            markup=False,
            soft_wrap=True,
        )
    console.print(f"inbox: http://{host}:{port}{config.base_path.rstrip('/')}/ui/", markup=False, highlight=False)


@app.command(cls=Command)
def worker(root: Path = ROOT) -> None:
    """Run a Temporal worker for agents/ alone ([temporal] in agent-unit.toml); dev runs one already."""
    from . import worker as working

    with reported():
        working.run(root.resolve(), console)


@app.command("build", cls=Command)
def build_command(
    root: Path = ROOT,
    preset: str | None = typer.Option(
        None, "--preset", help=f"{', '.join(PRESETS)} or an installed one (default: the config's, or server)."
    ),
    out: Path | None = typer.Option(None, "--out", help="Output folder (default: the preset's)."),
    arch: str | None = typer.Option(
        None, "--arch", help="aws-lambda: x86_64 (default) or arm64; docker: x86_64 or arm64 (default: this machine's)."
    ),
    python: str | None = typer.Option(
        None,
        "--python",
        help="aws-lambda: 3.11-3.13; docker: 3.11-3.14 (default: this one); vercel: 3.12 (default) to 3.14.",
    ),
    origin: str | None = typer.Option(None, "--origin", help="netlify: the URL of the agent-unit backend."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (for CI)."),
) -> None:
    """Build the agents for a host."""
    options = BuildOptions(arch=arch, python=python, origin=origin)
    with reported(as_json):
        config, source = load_config(root)
        named = source.name if source is not None else "agent-unit.toml"
        if as_json:
            result = build(root, config, preset=preset, out=out, options=options, source=named)
        else:
            with console.status("building") as status:
                result = build(
                    root,
                    config,
                    preset=preset,
                    out=out,
                    options=options,
                    source=named,
                    progress=lambda step: status.update(step),
                )
    if as_json:
        print(json.dumps(result.to_dict()))
        return
    what = f"{len(result.agents)} agent(s)"
    if result.server:  # your app ("module:app"), or a server preset's (its name)
        what = f"your app {result.server}" if ":" in result.server else f"the {result.server} server"
    console.print(
        f"[green]built[/green] {escape(what)} with the {result.preset} preset into " + escape(str(result.output))
    )
    if not result.server:
        console.print(f"agents: {', '.join(result.agents)}", markup=False)
    for route in result.routes:
        console.print(f"  {route}", highlight=False, markup=False)
    console.print(f"wrote: {', '.join(result.files)}", markup=False)
    for task in result.tasks:
        console.print(
            f"task {task['name']} ({task['schedule']} UTC, {task['handler']}): run by {task['runs_on']}", markup=False
        )
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    console.print(f"next: [bold]{escape(result.run)}[/bold]")


@app.command(cls=Command)
def add(
    package: str = typer.Argument(..., help="An adapter package (name or folder), or a framework agent-unit adapts."),
    root: Path = ROOT,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before installing and changing the configuration."),
) -> None:
    """Install an adapter package and add it to the configuration (a built-in framework: its extra)."""
    import tempfile

    from agent_unit.errors import AdapterError, AddError

    from .add import adapter_references, add_to_config, candidate, distributions, install, uninstall, with_extras
    from .frameworks import framework_for

    try:
        framework = framework_for(package)
        if framework is not None:
            _add_framework(framework, root)
            return
        with tempfile.TemporaryDirectory(prefix="agent-unit-add-") as folder:
            with console.status(f"looking at {escape(package)}"):
                found = candidate(package, Path(folder))
            listed = ", ".join(found.references)
            if not yes and not typer.confirm(f"Install {found.name} and add {listed} to the project's adapters?"):
                console.print("nothing installed, nothing changed in the configuration")
                return
            before = distributions()
            try:
                with console.status(f"installing {escape(found.name)}"):
                    install([with_extras(package, found.wheel)], root)
                references = adapter_references(found.name)  # its adapters load
            except (AddError, AdapterError):
                uninstall(sorted(distributions() - before))  # what this install added, dependencies included
                raise
        path, added = add_to_config(root, references)
    except (AddError, AdapterError) as exc:
        raise fail(str(exc)) from None
    if added:
        console.print(f"[green]added[/green] {escape(', '.join(added))} to {escape(str(path))}")
    else:
        console.print(f"{found.name} is already in {path}", markup=False)


def _add_framework(framework: Framework, root: Path) -> None:
    """A framework with a built-in adapter: install agent-unit's extra for it, or say it is there."""
    from .add import install
    from .frameworks import installable, missing, requirements

    extra = f"agent-unit[{framework.extra}]"
    wanted = missing(requirements(framework))
    if not wanted:
        console.print(
            f"agent-unit adapts {framework.name} itself and {extra} is installed: nothing to add. "
            f"Write an agent with it in agents/; agent-unit agents lists it.",
            markup=False,
            soft_wrap=True,
        )
        return
    specs = [installable(item) for item in wanted]
    console.print(
        f"agent-unit adapts {framework.name} itself: installing {extra} ({', '.join(specs)})",
        markup=False,
        soft_wrap=True,
    )
    with console.status(f"installing {escape(extra)}"):
        install(specs, root)
    console.print(
        f"[green]installed[/green] {escape(extra)}: its built-in adapter serves {escape(framework.name)} agents, "
        "nothing to add to the configuration",
        soft_wrap=True,
    )


# scheduled tasks: agent_unit_cli/tasks.py
app.command("task", cls=Command)(tasks.task)


def main() -> None:
    app()


if __name__ == "__main__":  # python -m agent_unit_cli.main, as python -m agent_unit_cli
    main()
