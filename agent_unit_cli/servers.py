"""``server = "module:app"``: the user's own ASGI app, imported from the project and checked.

``build`` and ``dev`` load it here first, so a module that does not import, or a value that is
not an ASGI 3 app, is one :class:`~agent_unit.errors.ServerError` naming the module, the
attribute and the line of the user's own code that failed, before anything is written or served.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

from agent_unit.errors import ServerError
from agent_unit.tasks import failed_at

__all__ = ["is_asgi", "load_server"]


def is_asgi(value: Any) -> bool:
    """An ASGI 3 app: ``async def app(scope, receive, send)``, or an object whose ``__call__`` is one."""
    if inspect.isclass(value):
        return False  # ASGI 2 (a class made per scope) or a class the user forgot to instantiate
    call = value if inspect.isfunction(value) or inspect.ismethod(value) else getattr(value, "__call__", None)  # noqa: B004
    if call is None or not inspect.iscoroutinefunction(call):
        return False
    try:
        inspect.signature(call).bind(None, None, None)
    except TypeError:
        return False
    return True


def load_server(reference: str, root: Path) -> Any:
    """Import ``"module:attribute"`` from ``root`` and return the ASGI app it names."""
    module_name, _, attribute = reference.partition(":")
    project = root.resolve()
    if str(project) not in sys.path:
        sys.path.insert(0, str(project))
    prefix = f"server = {reference!r}"
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - whatever the user's module raised, shown at its line
        name = exc.name if isinstance(exc, ModuleNotFoundError) else None
        own = project / Path(*module_name.split("."))
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
