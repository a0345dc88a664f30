"""npm packages the Cloudflare tests run (wrangler, its workerd), installed once into the user's cache.

The cache is ``$XDG_CACHE_HOME`` or ``~/.cache``, under ``agent-unit-tests/``, keyed by version.
Without node and npm a test skips here and fails in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

WRANGLER = "4.86.0"  # runs on Node 20; 4.164 needs Node 22.12


def unavailable(what: str) -> None:
    """Skip here, fail in CI: a check against Cloudflare's own tools is never silently left out there."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is missing in CI")
    pytest.skip(f"{what} is missing")


def cached(name: str, install: Callable[[Path], None]) -> Path:
    """A folder in the user's cache made once by ``install(folder)``, reused by later sessions."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agent-unit-tests"
    final = cache / name
    if (final / ".complete").exists():
        return final
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=cache))
    install(staging)
    (staging / ".complete").write_text("")
    try:
        staging.rename(final)
    except OSError:  # another session got there first (or a stale copy is in the way)
        if (final / ".complete").exists():
            shutil.rmtree(staging, ignore_errors=True)
        else:
            shutil.rmtree(final, ignore_errors=True)
            staging.rename(final)
    return final


def npm() -> str:
    found = shutil.which("npm")
    if found is None or shutil.which("node") is None:
        unavailable("node and npm (to install wrangler)")
    assert found is not None
    return found


def wrangler_folder() -> Path:
    """The folder wrangler is installed in (``node_modules/`` holds wrangler, miniflare and workerd)."""
    command = [npm(), "install", "--no-audit", "--no-fund", f"wrangler@{WRANGLER}"]

    def install(folder: Path) -> None:
        subprocess.run([*command, "--prefix", str(folder)], check=True, capture_output=True, timeout=600)

    return cached(f"wrangler-{WRANGLER}", install)
