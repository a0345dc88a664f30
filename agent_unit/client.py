"""A typed client for the HTTP API that never loses an event.

    async with AgentClient("http://localhost:3000") as agents:
        async for event in agents.run("refund", {"order_id": "o_1"}):
            if event.type == "RUN_INTERRUPTED":
                run_id = event.data["runId"]
        async for event in agents.resume(run_id, {"approved": True}):
            print(event.seq, event.type)
        record = await agents.get(run_id)  # a RunRecord

A stream that drops is reconnected from the last seq it delivered (``Last-Event-ID``), so
every event arrives once. Streams yield :class:`RunEvent` (seq, type, and the event's AG-UI
JSON as ``data``); runs are :class:`RunRecord`, pages :class:`RunPage`, the manifest
:class:`Manifest`. Errors are the same types the engine raises (``RunNotFound``,
``NotInterrupted``, ``InvalidAnswer``...), carrying the server's ``code``. ``SyncAgentClient``
is the same for scripts.

The two share everything but their I/O, as httpx's clients do: the requests are built by the
functions below and a stream's place and reconnections are kept by :class:`_Cursor`, which does
no I/O; each client only sends, reads and sleeps its own way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, NamedTuple

import httpx
from httpx_sse import EventSource, ServerSentEvent
from pydantic import BaseModel

from . import errors
from ._records import RunEvent, RunPage, RunRecord

__all__ = ["AgentClient", "AgentInfo", "Manifest", "RunEvent", "RunPage", "RunRecord", "SyncAgentClient"]


class AgentInfo(BaseModel):
    """One agent of the manifest (``GET /agents``)."""

    name: str
    description: str | None = None
    framework: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None


class Manifest(BaseModel):
    name: str
    agents: list[AgentInfo]


_DROPPED = (httpx.ReadError, httpx.RemoteProtocolError, httpx.ConnectError, httpx.ReadTimeout, httpx.WriteError)
_BY_CODE: dict[str, type[errors.AgentUnitError]] = {
    cls.code: cls
    for cls in vars(errors).values()
    if isinstance(cls, type) and issubclass(cls, errors.AgentUnitError) and "code" in vars(cls)
}
_STREAM = {"accept": "text/event-stream"}


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        error = response.json()["error"]
        code, message, details = error["code"], error["message"], error.get("details")
    except (ValueError, KeyError, TypeError):
        code, message, details = errors.HttpError.code, f"HTTP {response.status_code}: {response.text[:200]}", None
    cls = _BY_CODE.get(code, errors.AgentUnitError)
    exc = cls(message, details=details)
    exc.code, exc.status = code, response.status_code
    raise exc


def _page(body: dict[str, Any]) -> RunPage:
    return RunPage([RunRecord.model_validate(run) for run in body["runs"]], body.get("next_cursor"))


# -- requests: built once for both clients ------------------------------------------------


class _Request(NamedTuple):
    method: str
    url: str
    params: dict[str, str] | None = None
    json: Any = None

    def send(self) -> dict[str, Any]:
        """The keyword arguments of ``httpx.Client.request`` and ``.stream`` (and their async twins)."""
        return {"method": self.method, "url": self.url, "params": self.params, "json": self.json}


def _start(agent: str, input: Any, thread_id: str | None, wait: bool = False) -> _Request:
    body = {"input": input} if thread_id is None else {"input": input, "thread_id": thread_id}
    return _Request("POST", f"/agents/{agent}/runs", {"wait": "1"} if wait else None, body)


def _resume(run_id: str, answer: Any) -> _Request:
    return _Request("POST", f"/runs/{run_id}/resume", json={"answer": answer})


def _retry(run_id: str, wait: bool) -> _Request:
    return _Request("POST", f"/runs/{run_id}/retry", {"wait": "1"} if wait else None)


def _list(filters: Mapping[str, Any]) -> _Request:
    return _Request("GET", "/runs", {key: value for key, value in filters.items() if value is not None})


def _http_options(base_url: str, headers: Mapping[str, str] | None, timeout: float) -> dict[str, Any]:
    """What both clients' httpx clients are made with: a stream may stay quiet for long, so no read timeout."""
    return {
        "base_url": base_url.rstrip("/"),
        "headers": dict(headers or {}),
        "timeout": httpx.Timeout(timeout, read=None),
    }


# -- streams: a place in the run's events, and when to reconnect ------------------------------


class _Cursor:
    """One stream's place in a run's events and its reconnections, without I/O.

    ``after`` is the seq of the last event delivered: a reconnection sends it as ``Last-Event-ID``,
    so every event arrives once. It is None until the server has answered the request that starts
    the stream: a drop before that may have lost the request, so it is raised, never sent again.
    """

    def __init__(self, run_id: str | None, after: int | None, reconnects: int) -> None:
        self.run_id, self.after, self.reconnects = run_id, after, reconnects
        self.failures = 0
        self.cut_short = False
        """The server's last word was ``retry:`` and no event: it ended the stream early (spec/events.md)."""

    def opened(self, response: httpx.Response) -> None:
        """The server answered a start or a resume: the run, and the seq its stream starts after."""
        self.run_id = response.headers.get("x-run-id", self.run_id)
        self.after = int(response.headers.get("x-stream-after", "0"))

    @property
    def resumable(self) -> bool:
        """Whether a dropped start or resume can be read on from where it stopped."""
        return self.run_id is not None and self.after is not None

    def events_request(self, follow: bool) -> tuple[_Request, dict[str, str]]:
        """The next connection to ``GET /runs/{id}/events``, from ``after``; and its headers."""
        assert self.run_id is not None and self.after is not None
        self.cut_short = False
        request = _Request("GET", f"/runs/{self.run_id}/events", {"follow": "1"} if follow else None)
        return request, {**_STREAM, "last-event-id": str(self.after)}

    def read(self, sse: ServerSentEvent) -> RunEvent | None:
        """A stored event with its seq, or None for a keep-alive or the server's ``retry:``."""
        self.cut_short = sse.retry is not None and not sse.data
        if not sse.data:
            return None
        event = RunEvent.parse(int(sse.id), sse.data)
        self.after, self.failures = event.seq, 0
        return event

    def backoff(self) -> float | None:
        """A connection failed or was cut short: seconds to wait before the next, None after too many."""
        self.failures += 1
        return None if self.failures > self.reconnects else min(0.1 * 2**self.failures, 5.0)


_GAVE_UP = "the server's store stayed unavailable: try again later"


class AgentClient:
    """Async client. ``reconnects`` bounds the reconnections of one stream (with backoff)."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        reconnects: int = 10,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(**_http_options(base_url, headers, timeout), transport=transport)
        self._reconnects = reconnects

    async def __aenter__(self) -> AgentClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _json(self, request: _Request) -> Any:
        response = await self._http.request(**request.send())
        _raise_for(response)
        return None if response.status_code == 204 else response.json()

    # -- streams ---------------------------------------------------------------------------

    def run(self, agent: str, input: Any = None, *, thread_id: str | None = None) -> AsyncIterator[RunEvent]:
        """Start a run and yield its events until it parks or ends."""
        return self._stream(_start(agent, input, thread_id), _Cursor(None, None, self._reconnects))

    def resume(self, run_id: str, answer: Any = None) -> AsyncIterator[RunEvent]:
        """Answer an interrupted run and yield its new events until it parks or ends."""
        return self._stream(_resume(run_id, answer), _Cursor(run_id, None, self._reconnects))

    def events(self, run_id: str, *, after: int = 0, follow: bool = False) -> AsyncIterator[RunEvent]:
        """The run's events after seq ``after`` (until it parks or ends, or for good with ``follow``)."""
        return self._follow(_Cursor(run_id, after, self._reconnects), follow)

    async def _stream(self, request: _Request, cursor: _Cursor) -> AsyncIterator[RunEvent]:
        try:
            async with self._http.stream(**request.send(), headers=_STREAM) as response:
                if response.status_code >= 400:
                    await response.aread()
                    _raise_for(response)
                cursor.opened(response)
                async for sse in EventSource(response).aiter_sse():
                    if (event := cursor.read(sse)) is not None:
                        yield event
                if not cursor.cut_short:
                    return
        except _DROPPED:
            if not cursor.resumable:
                raise
        async for event in self._follow(cursor, False):
            yield event

    async def _follow(self, cursor: _Cursor, follow: bool) -> AsyncIterator[RunEvent]:
        while True:
            request, headers = cursor.events_request(follow)
            try:
                async with self._http.stream(**request.send(), headers=headers) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        _raise_for(response)
                    async for sse in EventSource(response).aiter_sse():
                        if (event := cursor.read(sse)) is not None:
                            yield event
                    if not cursor.cut_short:
                        return
            except _DROPPED:
                if (delay := cursor.backoff()) is None:
                    raise
            else:  # the server ended the stream early (its store went away): reconnect the same way
                if (delay := cursor.backoff()) is None:
                    raise errors.StoreUnavailable(_GAVE_UP)
            await asyncio.sleep(delay)

    # -- records ---------------------------------------------------------------------------

    async def start(
        self, agent: str, input: Any = None, *, thread_id: str | None = None, wait: bool = False
    ) -> RunRecord:
        """Start a run without streaming; with ``wait``, return once it parks or ends."""
        return RunRecord.model_validate(await self._json(_start(agent, input, thread_id, wait)))

    async def get(self, run_id: str) -> RunRecord:
        return RunRecord.model_validate(await self._json(_Request("GET", f"/runs/{run_id}")))

    async def list(self, **filters: Any) -> RunPage:
        """``status``, ``agent``, ``thread_id``, ``limit``, ``cursor``: a page of runs and the next cursor."""
        return _page(await self._json(_list(filters)))

    async def cancel(self, run_id: str) -> RunRecord:
        return RunRecord.model_validate(await self._json(_Request("POST", f"/runs/{run_id}/cancel")))

    async def retry(self, run_id: str, *, wait: bool = False) -> RunRecord:
        """Retry a failed run from the work that failed (409 unless it failed, or another retry won);
        with ``wait``, return once it parks or ends again."""
        return RunRecord.model_validate(await self._json(_retry(run_id, wait)))

    async def delete(self, run_id: str) -> None:
        await self._json(_Request("DELETE", f"/runs/{run_id}"))

    async def agents(self) -> Manifest:
        return Manifest.model_validate(await self._json(_Request("GET", "/agents")))


class SyncAgentClient:
    """The same client for scripts: blocking calls, plain iterators."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        reconnects: int = 10,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(**_http_options(base_url, headers, timeout), transport=transport)
        self._reconnects = reconnects

    def __enter__(self) -> SyncAgentClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _json(self, request: _Request) -> Any:
        response = self._http.request(**request.send())
        _raise_for(response)
        return None if response.status_code == 204 else response.json()

    def run(self, agent: str, input: Any = None, *, thread_id: str | None = None) -> Iterator[RunEvent]:
        return self._stream(_start(agent, input, thread_id), _Cursor(None, None, self._reconnects))

    def resume(self, run_id: str, answer: Any = None) -> Iterator[RunEvent]:
        return self._stream(_resume(run_id, answer), _Cursor(run_id, None, self._reconnects))

    def events(self, run_id: str, *, after: int = 0, follow: bool = False) -> Iterator[RunEvent]:
        return self._follow(_Cursor(run_id, after, self._reconnects), follow)

    def _stream(self, request: _Request, cursor: _Cursor) -> Iterator[RunEvent]:
        try:
            with self._http.stream(**request.send(), headers=_STREAM) as response:
                if response.status_code >= 400:
                    response.read()
                    _raise_for(response)
                cursor.opened(response)
                for sse in EventSource(response).iter_sse():
                    if (event := cursor.read(sse)) is not None:
                        yield event
                if not cursor.cut_short:
                    return
        except _DROPPED:
            if not cursor.resumable:
                raise
        yield from self._follow(cursor, False)

    def _follow(self, cursor: _Cursor, follow: bool) -> Iterator[RunEvent]:
        while True:
            request, headers = cursor.events_request(follow)
            try:
                with self._http.stream(**request.send(), headers=headers) as response:
                    if response.status_code >= 400:
                        response.read()
                        _raise_for(response)
                    for sse in EventSource(response).iter_sse():
                        if (event := cursor.read(sse)) is not None:
                            yield event
                    if not cursor.cut_short:
                        return
            except _DROPPED:
                if (delay := cursor.backoff()) is None:
                    raise
            else:  # the server ended the stream early (its store went away): reconnect the same way
                if (delay := cursor.backoff()) is None:
                    raise errors.StoreUnavailable(_GAVE_UP)
            time.sleep(delay)

    def start(self, agent: str, input: Any = None, *, thread_id: str | None = None, wait: bool = False) -> RunRecord:
        return RunRecord.model_validate(self._json(_start(agent, input, thread_id, wait)))

    def get(self, run_id: str) -> RunRecord:
        return RunRecord.model_validate(self._json(_Request("GET", f"/runs/{run_id}")))

    def list(self, **filters: Any) -> RunPage:
        return _page(self._json(_list(filters)))

    def cancel(self, run_id: str) -> RunRecord:
        return RunRecord.model_validate(self._json(_Request("POST", f"/runs/{run_id}/cancel")))

    def retry(self, run_id: str, *, wait: bool = False) -> RunRecord:
        return RunRecord.model_validate(self._json(_retry(run_id, wait)))

    def delete(self, run_id: str) -> None:
        self._json(_Request("DELETE", f"/runs/{run_id}"))

    def agents(self) -> Manifest:
        return Manifest.model_validate(self._json(_Request("GET", "/agents")))
