"""``server = "module:app"``: the user's own ASGI app, imported from the project and checked.

``build`` and ``dev`` load it here first, so a module that does not import, or a value that is
not an ASGI 3 app, is one :class:`~agent_unit.errors.ServerError` naming the module, the
attribute and the line of the user's own code that failed, before anything is written or served.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

from agent_unit._asgi import is_asgi
from agent_unit._tasks import failed_at
from agent_unit.errors import ServerError

__all__ = ["is_asgi", "load_server"]


def load_server(reference: str, root: Path, generated: Path | None = None) -> Any:
    """Import ``"module:attribute"`` from ``root`` (or the ``generated`` folder a server preset wrote,
    after it) and return the ASGI app it names."""
    module_name, _, attribute = reference.partition(":")
    project = root.resolve()
    if generated is not None and str(generated.resolve()) not in sys.path:
        sys.path.insert(0, str(generated.resolve()))
    if str(project) not in sys.path:
        sys.path.insert(0, str(project))
    prefix = f"server = {reference!r}"
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - whatever the user's module raised, shown at its line
        name = exc.name if isinstance(exc, ModuleNotFoundError) else None
        own = (generated or project) / Path(*module_name.split("."))
        if name and f"{module_name}.".startswith(f"{name}.") and not (own.with_suffix(".py").is_file() or own.is_dir()):
            raise ServerError(
                f"{prefix}: no module named {name!r} in the project: write the module's dotted path from the project "
                "folder (server = 'app.main:app' for app/main.py)"
            ) from None
        raise ServerError(f"{prefix}: {module_name} failed to import: {failed_at(exc, project)}") from None
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise ServerError(f"{prefix}: module {module_name} has no attribute {part!r}: name the app object")
        value = getattr(value, part)
    if not is_asgi(value):
        raise ServerError(
            f"{prefix} is a {type(value).__name__}, not an ASGI app: name the app object itself "
            "(app = FastAPI(), Starlette(...), Django's get_asgi_application())"
        )
    return value
