"""Bytecode for a serverless function, compiled by a Python of the host's version.

A function's files are read-only on AWS Lambda and Vercel, so a module without bytecode beside
it is compiled again at every cold start: the refund example's Vercel function took 1.0 s to
start without it and 0.32 s with it (``bench/vercel_cold.py``). Bytecode is tied to a Python version, so the
build compiles with an interpreter of the host's version (this one, one on the PATH, or one that
pyenv keeps: :func:`~agent_unit_cli.starts.interpreter`), and says so when this machine has none.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from .starts import interpreter

__all__ = ["compile_bytecode", "no_bytecode"]


def compile_bytecode(paths: Sequence[Path], version: str) -> bool:
    """Write ``__pycache__/*.pyc`` for every module in ``paths`` (folders or files) with a Python of
    ``version``; False, and nothing written, when this machine has no such Python.

    Unchecked hashes: the bytecode stays valid whatever the files' times are once unzipped or
    uploaded. A file that does not compile for that Python (a vendored package's Python 2 test,
    say) is left without bytecode; the others get theirs.
    """
    python = interpreter(version)
    if python is None:
        return False
    command = [python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash"]
    subprocess.run([*command, *(str(path) for path in paths)], capture_output=True, check=False)
    return True


def no_bytecode(version: str, host: str) -> str:
    """The build's warning when :func:`compile_bytecode` found no Python of ``version``."""
    return (
        f"no Python {version} on this machine, so the {host} function has no bytecode: each cold start "
        f"compiles every module it imports (about three times slower to start). Install Python {version} "
        f"(e.g. pyenv install {version}) and build again"
    )
