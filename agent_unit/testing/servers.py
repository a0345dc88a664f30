"""Test a server preset of your own as the build and ``agent-unit dev`` use it.

    from agent_unit_cli.presets import PRESETS
    from agent_unit.testing.servers import assert_server_preset

    app = assert_server_preset(server, project_root, PRESETS["aws-lambda"], {"web": False})

``entry`` writes its module into a fresh folder, returns ``"module:attribute"``, and that
module imports (with the project's root first on ``sys.path``, as the build checks it) to an
ASGI app. A refusal (``ValueError``) is raised as it is, for a test to match its message.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._asgi import is_asgi

__all__ = ["assert_server_preset"]


def assert_server_preset(server: Any, root: Path, preset: Any, options: Mapping[str, Any] | None = None) -> Any:
    """The ASGI app ``server`` makes for the build preset ``preset`` (a ``Preset`` of the CLI) over the
    project at ``root``; ``AssertionError`` saying what the server preset got wrong."""
    assert isinstance(getattr(server, "name", None), str), "a server preset has a `name` (str)"
    gen_dir = Path(tempfile.mkdtemp(prefix="agent-unit-server-"))
    reference = server.entry(Path(root).resolve(), gen_dir, preset, dict(options or {}))
    module_name, _, attribute = str(reference).partition(":")
    assert attribute, f"entry returned {reference!r}: return 'module:attribute'"
    written = gen_dir / f"{module_name.split('.')[0]}"
    assert written.with_suffix(".py").is_file() or written.is_dir(), f"entry did not write {module_name} into gen_dir"
    sys.path[:0] = [str(Path(root).resolve()), str(gen_dir)]
    try:
        value: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            value = getattr(value, part)
    finally:
        for entry in (str(Path(root).resolve()), str(gen_dir)):
            sys.path.remove(entry)
    assert is_asgi(value), f"{reference} is a {type(value).__name__}, not an ASGI app"
    return value
