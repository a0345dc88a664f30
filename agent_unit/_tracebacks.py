"""The frames of a traceback a person wants to read: their own code's, not agent-unit's.

A failed run keeps them in its record (``error.frames``, shown by the inbox) and a failed task
prints them. agent-unit's own frames and the asyncio, import and thread machinery around the
user's code are left out; for a run, so are the standard library and installed packages, unless
nothing else is left (an error raised inside a library called from code we cannot tell apart).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import importlib
import inspect
import sysconfig
import traceback
from pathlib import Path
from typing import Any

__all__ = ["foreign_frames", "user_frames"]

_OURS = (str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent / "agent_unit_cli"))
_MACHINERY = tuple(
    str(Path(inspect.getfile(package)).resolve().parent) for package in (asyncio, importlib, concurrent.futures)
)
_MAX_FRAMES = 20  # the innermost ones: a deep recursion must not fill the run record
_MAX_CODE = 200


def foreign_frames(exc: BaseException) -> traceback.StackSummary:
    """The frames of ``exc``'s traceback that are neither agent-unit's nor the machinery around it."""
    frames = traceback.extract_tb(exc.__traceback__)
    return traceback.StackSummary.from_list(
        [
            frame
            for frame in frames
            if not frame.filename.startswith("<frozen")
            and not str(Path(frame.filename).resolve()).startswith((*_OURS, *_MACHINERY))
        ]
    )


@functools.cache
def _libraries() -> tuple[str, ...]:
    """Where the standard library and installed packages live (read on the first failure)."""
    return tuple(
        {str(Path(sysconfig.get_path(name)).resolve()) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    )


def _shown(filename: str) -> str:
    """A file under the working directory (the project) relative to it: ``agents/refund.py``."""
    path = Path(filename)
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except (ValueError, OSError):
        return filename


def user_frames(exc: BaseException) -> list[dict[str, Any]]:
    """``{file, line, function, code}`` for each frame of the user's own code, outermost first
    (``file`` relative to the working directory when it is under it)."""
    foreign = list(foreign_frames(exc))
    own = [frame for frame in foreign if not str(Path(frame.filename).resolve()).startswith(_libraries())]
    return [
        {
            "file": _shown(frame.filename),
            "line": frame.lineno,
            "function": frame.name,
            "code": (frame.line or "").strip()[:_MAX_CODE],
        }
        for frame in (own or foreign)[-_MAX_FRAMES:]
    ]
