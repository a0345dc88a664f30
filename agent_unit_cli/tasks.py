"""``agent-unit task``: list the scheduled tasks, or run one once from source.

    agent-unit task                 # each task, its schedule and its next run (UTC)
    agent-unit task send-digest     # run it now, print what it returned
    agent-unit task --json          # the list, for scripts and CI

A run imports the handler from the project folder (``--root``) with this process's
environment, calls it with the task's name and the current time, waits for its ``wait_until``
work, and prints the result. A handler that raises exits 1 with its own traceback lines.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agent_unit._tasks import Task, handler_error, next_tick, run_task, tasks_from_config
from agent_unit.env import drain
from agent_unit.errors import ConfigError, TaskError

from .config import load_config
from .report import errors, fail

__all__ = ["task"]

console = Console()


def task(
    name: str | None = typer.Argument(None, help="The task to run once (without it: list the tasks)."),
    root: Path = typer.Option(Path("."), "--root", help="The project folder."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON (for scripts and CI)."),
) -> None:
    """List the scheduled tasks, or run one once from source."""
    try:
        config, source = load_config(root)
        tasks = tasks_from_config(config.tasks, root=root.resolve())
    except (ConfigError, TaskError) as exc:
        raise fail(str(exc)) from None
    if name is None:
        _list(tasks, as_json)
        return
    chosen = tasks.get(name)
    if chosen is None:
        known = ", ".join(sorted(tasks))
        where = source.name if source is not None else "agent-unit.toml"
        raise fail(
            f"no task named {name!r}: the tasks are {known}"
            if known
            else f"no task named {name!r}: {where} has no tasks; add [tasks.{name}] with schedule and handler"
        )
    try:
        handler = chosen.load()
    except TaskError as exc:
        raise fail(exc.message) from None
    scheduled_at = datetime.now(UTC).replace(microsecond=0)
    try:
        result = asyncio.run(_run(chosen, scheduled_at, handler))
    except Exception as exc:  # noqa: BLE001 - the user's handler: shown with its own lines, exit 1
        errors.print(f"[red]error:[/red] task {escape(name)} failed", highlight=False)
        errors.print(handler_error(exc), highlight=False, markup=False)
        raise typer.Exit(1) from None
    if as_json:
        print(json.dumps({"task": name, "scheduled_at": scheduled_at.isoformat(), "result": _plain(result)}))
        return
    console.print(f"[green]ran[/green] {escape(name)} (scheduled at {scheduled_at.isoformat()})", highlight=False)
    console.print(json.dumps(_plain(result), indent=2), highlight=False, markup=False)


async def _run(chosen: Task, scheduled_at: datetime, handler: Any) -> Any:
    try:
        return await run_task(chosen, scheduled_at, handler)
    finally:
        await drain(None)  # its wait_until work is part of the run


def _list(tasks: dict[str, Task], as_json: bool) -> None:
    now = datetime.now(UTC)
    rows = [(task, next_tick(task.schedule, now)) for _, task in sorted(tasks.items())]
    if as_json:
        listed = [
            {"name": t.name, "schedule": t.schedule, "handler": t.handler, "next_run": at.isoformat()} for t, at in rows
        ]
        print(json.dumps({"tasks": listed}))
        return
    if not rows:
        console.print("no tasks: add [tasks.NAME] with schedule and handler to agent-unit.toml", markup=False)
        return
    table = Table("task", "schedule (UTC)", "handler", "next run (UTC)")
    for chosen, at in rows:
        table.add_row(chosen.name, chosen.schedule, chosen.handler, at.strftime("%Y-%m-%d %H:%M"))
    console.print(table)


def _plain(value: Any) -> Any:
    """``value`` as JSON can show it: itself when it can, else its ``repr``."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value
