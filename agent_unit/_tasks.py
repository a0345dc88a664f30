"""Scheduled tasks: a ``[tasks.NAME]`` entry, its schedule, and running one tick of it.

    [tasks.send-digest]
    schedule = "0 8 * * *"              # five numeric fields, standard cron meaning, UTC
    handler = "app.tasks:send_digest"   # async def or def: handler(name, scheduled_at)

Schedules are portable: the hosts' schedulers (EventBridge, Vercel Cron, Cloudflare Cron
Triggers, the in-process scheduler) read them alike only as five numeric fields of ``*``,
numbers, ranges, lists and steps, where 0 and 7 are Sunday. An expression that restricts both
day-of-month and day-of-week is refused: cron runs it on either day, AWS and Vercel refuse it.

A handler receives the task's name and the tick's scheduled time (an aware UTC datetime); a
``def`` runs in a worker thread. :data:`Task` values are what a host's entry imports to run
the task its scheduler names. Next and previous times come from ``cronsim``, imported when
first needed.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import re
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ._tracebacks import foreign_frames
from .errors import TaskError

__all__ = [
    "Task",
    "check_schedule",
    "failed_at",
    "handler_error",
    "last_tick",
    "load_handler",
    "next_tick",
    "run_task",
    "tasks_from_config",
]

FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_ITEM = r"((\*|\d+-\d+)/\d+|\*|\d+(-\d+)?)"  # a step only on * or a range, as standard cron
_FIELD = re.compile(rf"^{_ITEM}(,{_ITEM})*$")
_HANDLER = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def check_schedule(schedule: str) -> str:
    """``schedule`` if it is portable; otherwise :class:`TaskError` saying what to write."""
    from cronsim import CronSim, CronSimError

    fields = schedule.split()
    example = "five numeric fields, minute hour day-of-month month day-of-week, in UTC (e.g. '0 8 * * *')"
    if len(fields) != 5:
        raise TaskError(f"schedule {schedule!r}: use {example}")
    for name, value in zip(FIELDS, fields, strict=True):
        if not _FIELD.match(value):
            raise TaskError(
                f"schedule {schedule!r}: the {name} field {value!r} is not portable: "
                "use numbers, *, ranges (1-5), lists (1,15) and steps (*/10); no names, L, W, # or ?"
            )
    if fields[2] != "*" and fields[4] != "*":
        raise TaskError(
            f"schedule {schedule!r} restricts both day-of-month ({fields[2]}) and day-of-week ({fields[4]}): "
            "cron runs it on either day and AWS and Vercel refuse it; set one of them to *"
        )
    try:
        CronSim(schedule, datetime(2026, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise TaskError(f"schedule {schedule!r}: {str(exc).lower()} value: use {example}") from None
    return schedule


def next_tick(schedule: str, after: datetime) -> datetime:
    """The first tick strictly after ``after`` (aware UTC)."""
    from cronsim import CronSim

    return next(CronSim(schedule, after.astimezone(UTC).replace(second=0, microsecond=0)))


def last_tick(schedule: str, at: datetime) -> datetime:
    """The latest tick at or before ``at`` (aware UTC)."""
    from cronsim import CronSim

    minute = at.astimezone(UTC).replace(second=0, microsecond=0)
    return next(CronSim(schedule, minute + timedelta(minutes=1), reverse=True))


@dataclass(frozen=True)
class Task:
    """One scheduled task: its name, its portable schedule and its ``"module:function"`` handler."""

    name: str
    schedule: str
    handler: str
    root: str | None = field(default=None, compare=False)
    """The project folder the handler's module is imported from (default: the current path)."""

    def load(self) -> Callable[..., Any]:
        return load_handler(self.handler, task=self.name, root=self.root)


def tasks_from_config(tasks: Mapping[str, Any], *, root: str | Path | None = None) -> dict[str, Task]:
    """``{name: Task}`` from ``[tasks.NAME]`` tables (mappings or objects with ``schedule`` and
    ``handler``), each schedule checked. This is the registry a host's entry imports."""
    found: dict[str, Task] = {}
    for name, entry in tasks.items():
        if isinstance(entry, Task):
            found[name] = entry
            continue
        schedule = entry["schedule"] if isinstance(entry, Mapping) else entry.schedule
        handler = entry["handler"] if isinstance(entry, Mapping) else entry.handler
        try:
            check_schedule(schedule)
        except TaskError as exc:
            raise TaskError(f"task {name}: {exc.message}") from None
        if not _HANDLER.match(handler):
            raise TaskError(f"task {name}: handler {handler!r}: write 'module:function', e.g. 'app.tasks:send_digest'")
        found[name] = Task(name, schedule, handler, root=None if root is None else str(root))
    return found


def load_handler(reference: str, *, task: str, root: str | Path | None = None) -> Callable[..., Any]:
    """Import ``"module:function"``; a failure is one :class:`TaskError` naming the module, the
    attribute and the user's own line that failed."""
    module_name, _, attribute = reference.partition(":")
    project = Path(root or ".").resolve()
    if root is not None and str(project) not in sys.path:
        sys.path.insert(0, str(project))
    prefix = f"task {task}: handler {reference!r}"
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - whatever the user's module raised, shown at its line
        name = exc.name if isinstance(exc, ModuleNotFoundError) else None
        if name and f"{module_name}.".startswith(f"{name}.") and not foreign_frames(exc):  # the path itself is wrong
            raise TaskError(
                f"{prefix}: no module named {name!r}: write the module's dotted path from the project folder"
            ) from None
        raise TaskError(f"{prefix}: {module_name} failed to import: {failed_at(exc, project)}") from None
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise TaskError(f"{prefix}: module {module_name} has no attribute {part!r}")
        value = getattr(value, part)
    if not callable(value):
        raise TaskError(f"{prefix} is a {type(value).__name__}, not a function")
    return value  # type: ignore[no-any-return]


async def run_task(task: Task, scheduled_at: datetime, handler: Callable[..., Any] | None = None) -> Any:
    """Run one tick: ``handler(name, scheduled_at)``, awaited, or in a worker thread for a ``def``
    (inline under Pyodide, which has no threads: a Cloudflare Worker's Cron Trigger).

    What the handler raises propagates: the caller logs it (the scheduler) or shows it (the CLI).
    """
    function = handler or task.load()
    when = scheduled_at.astimezone(UTC)
    if inspect.iscoroutinefunction(function):
        return await function(task.name, when)
    if sys.platform == "emscripten":
        result = function(task.name, when)
    else:
        result = await asyncio.to_thread(function, task.name, when)
    if inspect.isawaitable(result):
        result = await result
    return result


def handler_error(exc: BaseException) -> str:
    """What a handler raised, as a person reads it: the user's frames of the traceback, none of ours."""
    lines = traceback.format_list(foreign_frames(exc))
    lines += traceback.format_exception_only(type(exc), exc)
    return "Traceback (most recent call last):\n" + "".join(lines) if len(lines) > 1 else "".join(lines)


def failed_at(exc: BaseException, project: Path) -> str:
    """``Type: message (file, line N: code)`` at the innermost line of the project's own code
    (a library's line only when no line of the project's is in the traceback)."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{text} ({_shown(exc.filename, project)}, line {exc.lineno})"
    frames = foreign_frames(exc)
    own = [frame for frame in frames if Path(frame.filename).resolve().is_relative_to(project)]
    if own or frames:
        frame = (own or frames)[-1]
        return f"{text} ({_shown(frame.filename, project)}, line {frame.lineno}: {(frame.line or '').strip()})"
    return text


def _shown(filename: str, project: Path) -> str:
    path = Path(filename).resolve()
    return str(path.relative_to(project)) if path.is_relative_to(project) else filename
