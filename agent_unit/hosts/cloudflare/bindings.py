"""A Worker's ``env`` (its bindings, variables and secrets) as the mapping :data:`agent_unit.env.env` reads.

Each invocation's host carries it as ``bindings`` (:func:`.invocation.cloudflare_host`), so
``env["MAIL_API_KEY"]`` and ``run.secrets`` read a Worker's secrets as a server reads its process
environment.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["WorkerBindings"]


class WorkerBindings(Mapping[str, Any]):
    """A Cloudflare Worker's ``env`` (bindings, variables, secrets) as a read-only mapping.

    A name the Worker does not have is a ``KeyError``, as in the process environment. The
    names come from ``Object.keys`` of the JavaScript object, which lists every binding.
    """

    def __init__(self, worker_env: Any) -> None:
        self._env = worker_env

    def __getitem__(self, name: str) -> Any:
        try:
            value = getattr(self._env, name)
        except AttributeError:
            raise KeyError(name) from None
        if value is None:  # JavaScript's undefined
            raise KeyError(name)
        return value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and getattr(self._env, name, None) is not None

    def __iter__(self) -> Iterator[str]:
        try:
            from js import Object  # type: ignore[import-not-found]
        except ImportError:
            return iter(vars(self._env))
        return iter([str(name) for name in Object.keys(getattr(self._env, "_env", self._env))])

    def __len__(self) -> int:
        return sum(1 for _ in self)
