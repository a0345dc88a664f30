"""How every command reports a mistake in the user's project: one message on stderr, exit 1.

Discovery, adapters, stores and the client raise ``AgentUnitError`` subclasses; the
configuration ``ConfigError``; the build ``BuildError``. None of them is our bug, so none
shows a traceback. The message is printed as text: ``[redis]`` in ``pip install
"agent-unit[redis]"`` is advice, not Rich markup.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import typer
from rich.console import Console
from rich.markup import escape

from agent_unit.errors import AgentUnitError, BuildError, ConfigError

__all__ = ["PROJECT_ERRORS", "fail", "reported"]

PROJECT_ERRORS = (ConfigError, BuildError, AgentUnitError)

errors = Console(stderr=True, soft_wrap=True)  # one message is one line, whatever the terminal's width


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` and return the exit to raise."""
    errors.print(f"[red]error:[/red] {escape(message)}", highlight=False)
    return typer.Exit(1)


@contextlib.contextmanager
def reported(as_json: bool = False) -> Iterator[None]:
    """Turn a mistake in the project into one message (and ``{"error": ...}`` on stdout with ``--json``)."""
    try:
        yield
    except PROJECT_ERRORS as exc:
        message = exc.message if isinstance(exc, AgentUnitError) else str(exc)
        if as_json:
            print(json.dumps({"error": message}))
        raise fail(message) from None
