"""``agent-unit``: the command line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agent_unit import __version__
from agent_unit.adapters import AdapterError
from agent_unit.discovery import discover_agents
from agent_unit.errors import DiscoveryError

from .build import BuildError, build, routes
from .config import ConfigError, load_config
from .presets import PRESETS, BuildOptions

app = typer.Typer(help="Durable runs for any Python agent framework, on any host.", no_args_is_help=True)
console = Console()
errors = Console(stderr=True)

ROOT = typer.Option(Path("."), "--root", help="The project folder (holds agents/).")


def _version(value: bool) -> None:
    if value:
        console.print(f"agent-unit {__version__}")
        raise typer.Exit()


def _fail(message: str) -> typer.Exit:
    errors.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(1)


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Durable runs for any Python agent framework, on any host."""


@app.command()
def agents(root: Path = ROOT) -> None:
    """List the agents found in agents/."""
    try:
        config, _ = load_config(root)
        found = discover_agents(root, adapters=config.adapters)
    except (ConfigError, DiscoveryError, AdapterError) as exc:
        raise _fail(str(exc)) from None
    table = Table("agent", "framework", "description")
    for name, agent in sorted(found.items()):
        table.add_row(name, agent.framework, agent.description.splitlines()[0] if agent.description else "")
    console.print(table)


@app.command()
def presets() -> None:
    """List the build presets and what each needs."""
    table = Table("preset", "output", "runs on", "storage")
    for preset in PRESETS.values():
        table.add_row(preset.name, preset.output, preset.runs_on, preset.storage)
    console.print(table)


@app.command()
def dev(
    root: Path = ROOT,
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(3000, help="Port to listen on."),
    reload: bool = typer.Option(True, help="Restart when a file changes."),
) -> None:
    """Serve agents/ at http://localhost:3000, reloading on change."""
    try:
        config, source = load_config(root)
        found = discover_agents(root, adapters=config.adapters)
    except (ConfigError, DiscoveryError, AdapterError) as exc:
        raise _fail(str(exc)) from None
    console.print(f"[bold]agent-unit {__version__}[/bold] dev: {len(found)} agent(s) from {root.resolve() / 'agents'}")
    for name, agent in sorted(found.items()):
        console.print(f"  [cyan]{name}[/cyan]  {agent.description.splitlines()[0] if agent.description else ''}")
    for route in routes(config.base_path):
        console.print(f"  {route}", highlight=False)
    storage = config.storage or f"sqlite:///{root.resolve() / '.agent-unit' / 'agent-unit.db'}"
    console.print(f"storage: {storage}; config: {source or 'defaults'}")
    console.print(f"serving on http://{host}:{port}")
    import uvicorn

    os.environ["AGENT_UNIT_ROOT"] = str(root.resolve())
    os.environ.setdefault("AGENT_UNIT_URL", f"http://localhost:{port}")  # the A2A card's URL in development
    uvicorn.run(
        "agent_unit_cli.dev:app",
        factory=True,
        host=host,
        port=port,
        reload=reload,
        reload_dirs=[str(root.resolve())] if reload else None,
        log_level="warning",
    )


@app.command("build")
def build_command(
    root: Path = ROOT,
    preset: str | None = typer.Option(
        None, "--preset", help="server, docker, aws-lambda, vercel or netlify (default: the config's, or server)."
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
    try:
        config, _ = load_config(root)
        if as_json:
            result = build(root, config, preset=preset, out=out, options=options)
        else:
            with console.status("building") as status:
                result = build(
                    root, config, preset=preset, out=out, options=options, progress=lambda step: status.update(step)
                )
    except (ConfigError, BuildError) as exc:
        if as_json:
            print(json.dumps({"error": str(exc)}))
        raise _fail(str(exc)) from None
    if as_json:
        print(json.dumps(result.to_dict()))
        return
    console.print(
        f"[green]built[/green] {len(result.agents)} agent(s) with the {result.preset} preset into {result.output}"
    )
    console.print(f"agents: {', '.join(result.agents)}")
    for route in result.routes:
        console.print(f"  {route}", highlight=False)
    console.print(f"wrote: {', '.join(result.files)}")
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    console.print(f"next: [bold]{result.run}[/bold]")


@app.command()
def add(
    package: str = typer.Argument(..., help="A package name (pip requirement) or a local package folder."),
    root: Path = ROOT,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before changing the configuration."),
) -> None:
    """Install an adapter package and add it to the configuration."""
    from .add import AddError, adapter_references, add_to_config, install, installed, package_name, uninstall

    try:
        name = package_name(package)
        was_installed = installed(name)
        with console.status(f"installing {package}"):
            install(package, root)
        try:
            references = adapter_references(name)
        except (AddError, AdapterError):
            if not was_installed:
                uninstall(name)
            raise
        if not yes and not typer.confirm(f"Add {', '.join(references)} to the project's adapters?"):
            console.print("nothing changed in the configuration")
            return
        path, added = add_to_config(root, references)
    except (AddError, AdapterError) as exc:
        raise _fail(str(exc)) from None
    if added:
        console.print(f"[green]added[/green] {', '.join(added)} to {path}")
    else:
        console.print(f"{name} is already in {path}")


def main() -> None:
    app()
