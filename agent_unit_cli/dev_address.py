"""Where a running ``agent-unit dev`` serves a project: written by dev, read by ``agent-unit runs``.

A run resumed through the store by another process parks there with a wake time that the
dev server does not know of: it would sleep until dev's next sweep (a minute) instead of
its own few seconds. So dev's worker, once it listens, writes its address beside the
project's store (``.agent-unit/dev.json``: URL, pid and store URL), and ``runs resume``
and ``runs cancel`` go through that server's HTTP API while it answers. The file is removed
when the worker stops; a stale one (a killed dev) is ignored, since its process is gone or
its address does not answer, and then the CLI works on the store as before.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

__all__ = ["FILE", "connect_url", "forget", "record", "serving"]

FILE = Path(".agent-unit") / "dev.json"


def record(root: Path, url: str, store: str) -> None:
    """Say that this process serves ``root``'s ``store`` at ``url`` (written whole, never half)."""
    path = root / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".dev.{os.getpid()}.json")
    partial.write_text(json.dumps({"url": url, "pid": os.getpid(), "store": store}))
    os.replace(partial, path)


def forget(root: Path) -> None:
    """Remove the address if this process wrote it (another dev of the project may have since)."""
    path = root / FILE
    with contextlib.suppress(OSError, ValueError, AttributeError):
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()


def serving(root: Path, store: str) -> str | None:
    """The URL of a dev server that serves ``store`` for ``root`` and answers now; else ``None``."""
    try:
        found = json.loads((root / FILE).read_text())
        url, pid = str(found["url"]), int(found["pid"])
        if found["store"] != store:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if os.name == "posix":  # signal 0 only asks whether it lives (on Windows it would be Ctrl-C)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None  # killed without removing its address
        except PermissionError:
            pass  # alive, another user's
    import httpx

    try:
        httpx.get(f"{url.rstrip('/')}/healthz", timeout=2)
    except httpx.HTTPError:
        return None
    return url


def connect_url(host: str, port: int, base_path: str) -> str:
    """The URL a client on this machine reaches a server listening on ``host:port`` at."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{base_path.rstrip('/')}"
