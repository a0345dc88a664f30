"""``agent-unit``: the command line. For now it lists the agents it discovers."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from agent_unit import __version__
from agent_unit.discovery import discover_agents
from agent_unit.errors import DiscoveryError

app = typer.Typer(help="Durable runs for any Python agent framework, on any host.", no_args_is_help=True)
console = Console()


def _version(value: bool) -> None:
    if value:
        console.print(f"agent-unit {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Durable runs for any Python agent framework, on any host."""


@app.command()
def agents(root: Path = typer.Option(Path("."), "--root", help="The project folder (holds agents/).")) -> None:
    """List the agents found in agents/."""
    try:
        found = discover_agents(root)
    except DiscoveryError as exc:
        console.print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(1) from None
    table = Table("agent", "framework", "description")
    for name, agent in sorted(found.items()):
        table.add_row(name, agent.framework, agent.description.splitlines()[0] if agent.description else "")
    console.print(table)


def main() -> None:
    app()
