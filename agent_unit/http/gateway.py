"""The gateway: what every protocol served over HTTP needs from the app, as public names.

The REST routes, MCP, A2A and AG-UI all reach the engine through one :class:`Gateway`, so
one policy governs a run whichever protocol touches it: ``authorize`` runs before anything
about the request is revealed, a buffered host (AWS Lambda) runs a started or resumed run
until it parks, and every event stream reads the same stored events.

A protocol module of your own uses it the same way the built-in ones do::

    from starlette.routing import Route
    from agent_unit import create_agent_unit

    unit = create_agent_unit()

    async def my_protocol(request):
        record = await unit.gateway.run(request, "get", request.path_params["run_id"])
        ...

    unit.router.routes.append(Route("/my/{run_id}", my_protocol))
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from starlette.requests import Request

from .._agent import Agent
from .._engine import RunEngine
from .._records import RunRecord
from ..errors import RunNotFound, Unauthorized
from .auth import Authorize, answerer, authorize
from .guard import foreign_host, foreign_page
from .hostnames import HostNames
from .origins import Origins
from .stream import StreamItem, read_stream

__all__ = ["Gateway", "run_info"]


def run_info(record: RunRecord) -> dict[str, Any]:
    """What ``authorize(request, action, run)`` is told about an existing run."""
    return {"id": record.id, "agent": record.agent, "thread_id": record.thread_id}


class Gateway:
    """Authorization, run lookup, starting, resuming and cancelling, and event streams.

    The settings a protocol answers by are attributes: ``name`` (the deployment's, as
    manifests and cards show it), ``max_body_bytes``, ``keepalive`` and ``poll_interval``
    (seconds, for streams), ``public_url`` (the deployment's own URL, or None), ``origins``
    (the browser origins that may call), ``hosts`` (the deployment's names, which ``Host``
    must be), ``buffered`` (the host sends whole responses only), ``a2a_default_agent`` and
    ``require_answerer`` (a resume must say who answers: no anonymous answers).
    """

    def __init__(
        self,
        engine: RunEngine,
        *,
        name: str,
        authorize: Authorize | None,
        max_body_bytes: int,
        keepalive: float,
        poll_interval: float,
        public_url: str | None = None,
        origins: Origins | None = None,
        hosts: HostNames | None = None,
        buffered: bool = False,
        a2a_default_agent: str | None = None,
        require_answerer: bool = False,
    ) -> None:
        self.engine = engine
        self.name = name
        self.authorize_hook = authorize
        self.max_body_bytes = max_body_bytes
        self.keepalive = keepalive
        self.poll_interval = poll_interval
        self.public_url = public_url.rstrip("/") if public_url else None
        self.origins = origins if origins is not None else Origins(public_url)
        self.hosts = hosts if hosts is not None else HostNames(public_url)
        self.buffered = buffered
        self.a2a_default_agent = a2a_default_agent
        self.require_answerer = require_answerer

    @property
    def agents(self) -> Mapping[str, Agent]:
        """The agents served, by name."""
        return self.engine.agents

    def check_agent(self, agent: str) -> None:
        """Raise ``AgentBroken`` (503, with the file and line) if ``agent``'s file does not load."""
        self.engine.check_agent(agent)

    # -- authorization -----------------------------------------------------------------------

    async def authorize(self, request: Request, action: str, run: dict[str, Any]) -> None:
        """Raise 401/403 unless ``authorize`` allows ``action`` on ``run``.

        Call it before answering anything about the request (a body that does not parse, an
        agent or a run that does not exist), so a caller who may not act learns nothing.
        """
        self.engine.start_background()  # no lifespan needed: the first request starts the sweeps
        self.refuse_foreign_hosts(request)
        self.refuse_foreign_pages(request)
        await authorize(self.authorize_hook, request, action, run)
        # request.state keeps its attributes in scope["state"]: written there, no State object is made
        request.scope.setdefault("state", {})["agent_unit_authorized"] = True

    def refuse_foreign_hosts(self, request: Request) -> None:
        """421 for a request whose ``Host`` is not one of the deployment's names (DNS rebinding):
        :func:`~agent_unit.http.guard.foreign_host`, the check :class:`~agent_unit.http.HostGuard`
        puts in front of any app. :meth:`authorize` calls it, so every route that authorizes is covered.
        """
        problem = foreign_host(self.hosts, request.scope)
        if problem is not None:
            raise problem

    def refuse_foreign_pages(self, request: Request) -> None:
        """403 for a request that changes state from a page of a foreign site:
        :func:`~agent_unit.http.guard.foreign_page`. :meth:`authorize` calls it."""
        problem = foreign_page(self.hosts, self.origins, request.scope)
        if problem is not None:
            raise problem

    def authorized(self, request: Request) -> bool:
        """Whether :meth:`authorize` has let this request through already."""
        return bool(request.scope.get("state", {}).get("agent_unit_authorized", False))

    # -- runs --------------------------------------------------------------------------------

    async def run(self, request: Request, action: str, run_id: str) -> RunRecord:
        """The run, once ``authorize`` allows ``action`` on it. A missing run is authorized as
        ``{"id": run_id}`` before the 404, so a caller who may not act learns nothing of which
        run ids exist."""
        try:
            record = await self.engine.get(run_id)
        except RunNotFound:
            await self.authorize(request, action, {"id": run_id})
            raise
        await self.authorize(request, action, run_info(record))
        return record

    def waits(self, wait: bool) -> bool:
        """Whether a start or resume asked to ``wait`` runs the run until it parks or ends before
        answering: always on a buffered host, which freezes the process once it answers."""
        return wait or self.buffered

    async def start(
        self,
        agent: str,
        input: Any,
        *,
        thread_id: str | None = None,
        wait: bool = False,
        limits: dict[str, Any] | None = None,
    ) -> RunRecord:
        """Start a run of ``agent`` (authorize first); ``wait``: until it parks or ends (see :meth:`waits`);
        ``limits``: the run's own, within the deployment's (422 if one is over)."""
        return await self.engine.start(agent, input, thread_id=thread_id, wait=self.waits(wait), limits=limits)

    async def resume(
        self,
        run_id: str,
        answer: Any,
        *,
        interrupt_key: str | None = None,
        wait: bool = False,
        request: Request | None = None,
        record: RunRecord | None = None,
    ) -> RunRecord:
        """Answer an interrupted run (authorize first); 422 if the answer does not fit, 409 if
        it no longer waits (at ``interrupt_key``); ``wait``: see :meth:`waits`. ``record``: the
        run as :meth:`run` read it to authorize, which spares the resume a read of its own.

        The run records who answered (:func:`~agent_unit.http.auth.answerer` of ``request``) and
        when; with ``require_answerer``, an answer from nobody known is refused (401).
        """
        by = answerer(request)
        if by is None and self.require_answerer:
            raise Unauthorized(
                "this deployment records who answers, and this request names nobody: make authorize return "
                "the answerer's identity (a string), or authenticate the request (request.user)"
            )
        return await self.engine.resume(
            run_id, answer, wait=self.waits(wait), interrupt_key=interrupt_key, answered_by=by, record=record
        )

    async def send(self, run_id: str, value: Any, *, message_id: str | None = None) -> RunRecord:
        """Deliver a message to a run that has not ended (authorize first); 409 once it has."""
        return await self.engine.send(run_id, value, message_id=message_id)

    async def cancel(self, run_id: str, *, interrupt_key: str | None = None) -> RunRecord:
        """Cancel a run that has not finished (authorize first); 409 once it has."""
        return await self.engine.cancel(run_id, interrupt_key=interrupt_key)

    async def retry(self, run_id: str, *, wait: bool = False) -> RunRecord:
        """Retry a failed run from the work that failed (authorize first); 409 unless it failed, or
        when another retry won; ``wait``: see :meth:`waits`."""
        return await self.engine.retry(run_id, wait=self.waits(wait))

    async def last_seq(self, run_id: str) -> int:
        """The seq of the run's last stored event: a stream started after it shows only what comes next."""
        return await self.engine.last_seq(run_id)

    # -- streams -----------------------------------------------------------------------------

    def events(
        self,
        run_id: str,
        *,
        after: int,
        stop: asyncio.Event,
        follow: bool = False,
        keepalive: float | None = None,
    ) -> AsyncGenerator[StreamItem, None]:
        """The run's stored events after ``after`` and keep-alive markers (every ``keepalive``
        seconds, default the app's), until it parks or ends unless ``follow``, or ``stop`` is set.

        On a buffered host: the events stored so far, then the end (the client reconnects
        after the last seq it saw for more)."""
        return read_stream(
            self.engine,
            run_id,
            after=after,
            follow=follow,
            keepalive=self.keepalive if keepalive is None else keepalive,
            poll_interval=self.poll_interval,
            stop=stop,
            once=self.buffered,
        )
