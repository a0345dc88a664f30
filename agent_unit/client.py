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
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import httpx
from httpx_sse import EventSource
from pydantic import BaseModel

from . import errors
from .records import RunEvent, RunPage, RunRecord

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


def _start_body(input: Any, thread_id: str | None) -> dict[str, Any]:
    return {"input": input} if thread_id is None else {"input": input, "thread_id": thread_id}


def _interrupted(sse: Any) -> bool:
    """The server's last word on a stream it had to end early: ``retry:`` and no event (spec/events.md)."""
    return sse.retry is not None and not sse.data


def _event(sse: Any) -> RunEvent | None:
    """A stored event with its seq, or None for a keep-alive."""
    if not sse.data:
        return None
    return RunEvent.parse(int(sse.id), sse.data)


def _page(body: dict[str, Any]) -> RunPage:
    return RunPage([RunRecord.model_validate(run) for run in body["runs"]], body.get("next_cursor"))


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
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers=dict(headers or {}),
            timeout=httpx.Timeout(timeout, read=None),
            transport=transport,
        )
        self._reconnects = reconnects

    async def __aenter__(self) -> AgentClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self._http.request(method, path, **kwargs)
        _raise_for(response)
        return None if response.status_code == 204 else response.json()

    # -- streams ---------------------------------------------------------------------------

    def run(self, agent: str, input: Any = None, *, thread_id: str | None = None) -> AsyncIterator[RunEvent]:
        """Start a run and yield its events until it parks or ends."""
        return self._stream(f"/agents/{agent}/runs", _start_body(input, thread_id), None)

    def resume(self, run_id: str, answer: Any = None) -> AsyncIterator[RunEvent]:
        """Answer an interrupted run and yield its new events until it parks or ends."""
        return self._stream(f"/runs/{run_id}/resume", {"answer": answer}, run_id)

    def events(self, run_id: str, *, after: int = 0, follow: bool = False) -> AsyncIterator[RunEvent]:
        """The run's events after seq ``after`` (until it parks or ends, or for good with ``follow``)."""
        return self._follow(run_id, after, follow)

    async def _stream(self, path: str, body: dict[str, Any], run_id: str | None) -> AsyncIterator[RunEvent]:
        after: int | None = None  # None until the server has answered: then the request was not delivered
        try:
            async with self._http.stream("POST", path, json=body, headers=_STREAM) as response:
                if response.status_code >= 400:
                    await response.aread()
                    _raise_for(response)
                run_id = response.headers.get("x-run-id", run_id)
                after = int(response.headers.get("x-stream-after", "0"))
                interrupted = False
                async for sse in EventSource(response).aiter_sse():
                    if (event := _event(sse)) is not None:
                        after = event.seq
                        yield event
                    interrupted = _interrupted(sse)
                if not interrupted:
                    return
        except _DROPPED:
            if run_id is None or after is None:
                raise
        assert run_id is not None and after is not None
        async for event in self._follow(run_id, after, False):
            yield event

    async def _follow(self, run_id: str, after: int, follow: bool) -> AsyncIterator[RunEvent]:
        failures = 0
        while True:
            try:
                async with self._http.stream(
                    "GET",
                    f"/runs/{run_id}/events",
                    params={"follow": "1"} if follow else None,
                    headers={**_STREAM, "last-event-id": str(after)},
                ) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        _raise_for(response)
                    interrupted = False
                    async for sse in EventSource(response).aiter_sse():
                        if (event := _event(sse)) is not None:
                            after, failures = event.seq, 0
                            yield event
                        interrupted = _interrupted(sse)
                    if not interrupted:
                        return
            except _DROPPED:
                failures += 1
                if failures > self._reconnects:
                    raise
                await asyncio.sleep(min(0.1 * 2**failures, 5.0))
                continue
            failures += 1  # the server ended the stream early (its store went away): reconnect the same way
            if failures > self._reconnects:
                raise errors.StoreUnavailable("the server's store stayed unavailable: try again later")
            await asyncio.sleep(min(0.1 * 2**failures, 5.0))

    # -- records ---------------------------------------------------------------------------

    async def start(
        self, agent: str, input: Any = None, *, thread_id: str | None = None, wait: bool = False
    ) -> RunRecord:
        """Start a run without streaming; with ``wait``, return once it parks or ends."""
        body = await self._json(
            "POST", f"/agents/{agent}/runs", json=_start_body(input, thread_id), params={"wait": "1"} if wait else None
        )
        return RunRecord.model_validate(body)

    async def get(self, run_id: str) -> RunRecord:
        return RunRecord.model_validate(await self._json("GET", f"/runs/{run_id}"))

    async def list(self, **filters: Any) -> RunPage:
        """``status``, ``agent``, ``thread_id``, ``limit``, ``cursor``: a page of runs and the next cursor."""
        return _page(await self._json("GET", "/runs", params={k: v for k, v in filters.items() if v is not None}))

    async def cancel(self, run_id: str) -> RunRecord:
        return RunRecord.model_validate(await self._json("POST", f"/runs/{run_id}/cancel"))

    async def delete(self, run_id: str) -> None:
        await self._json("DELETE", f"/runs/{run_id}")

    async def agents(self) -> Manifest:
        return Manifest.model_validate(await self._json("GET", "/agents"))


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
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=dict(headers or {}),
            timeout=httpx.Timeout(timeout, read=None),
            transport=transport,
        )
        self._reconnects = reconnects

    def __enter__(self) -> SyncAgentClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._http.request(method, path, **kwargs)
        _raise_for(response)
        return None if response.status_code == 204 else response.json()

    def run(self, agent: str, input: Any = None, *, thread_id: str | None = None) -> Iterator[RunEvent]:
        return self._stream(f"/agents/{agent}/runs", _start_body(input, thread_id), None)

    def resume(self, run_id: str, answer: Any = None) -> Iterator[RunEvent]:
        return self._stream(f"/runs/{run_id}/resume", {"answer": answer}, run_id)

    def events(self, run_id: str, *, after: int = 0, follow: bool = False) -> Iterator[RunEvent]:
        return self._follow(run_id, after, follow)

    def _stream(self, path: str, body: dict[str, Any], run_id: str | None) -> Iterator[RunEvent]:
        after: int | None = None  # None until the server has answered: then the request was not delivered
        try:
            with self._http.stream("POST", path, json=body, headers=_STREAM) as response:
                if response.status_code >= 400:
                    response.read()
                    _raise_for(response)
                run_id = response.headers.get("x-run-id", run_id)
                after = int(response.headers.get("x-stream-after", "0"))
                for sse in EventSource(response).iter_sse():
                    if (event := _event(sse)) is not None:
                        after = event.seq
                        yield event
                return
        except _DROPPED:
            if run_id is None or after is None:
                raise
        yield from self._follow(run_id, after, False)

    def _follow(self, run_id: str, after: int, follow: bool) -> Iterator[RunEvent]:
        failures = 0
        while True:
            try:
                with self._http.stream(
                    "GET",
                    f"/runs/{run_id}/events",
                    params={"follow": "1"} if follow else None,
                    headers={**_STREAM, "last-event-id": str(after)},
                ) as response:
                    if response.status_code >= 400:
                        response.read()
                        _raise_for(response)
                    for sse in EventSource(response).iter_sse():
                        if (event := _event(sse)) is not None:
                            after, failures = event.seq, 0
                            yield event
                    return
            except _DROPPED:
                failures += 1
                if failures > self._reconnects:
                    raise
                time.sleep(min(0.1 * 2**failures, 5.0))

    def start(self, agent: str, input: Any = None, *, thread_id: str | None = None, wait: bool = False) -> RunRecord:
        body = self._json(
            "POST", f"/agents/{agent}/runs", json=_start_body(input, thread_id), params={"wait": "1"} if wait else None
        )
        return RunRecord.model_validate(body)

    def get(self, run_id: str) -> RunRecord:
        return RunRecord.model_validate(self._json("GET", f"/runs/{run_id}"))

    def list(self, **filters: Any) -> RunPage:
        return _page(self._json("GET", "/runs", params={k: v for k, v in filters.items() if v is not None}))

    def cancel(self, run_id: str) -> RunRecord:
        return RunRecord.model_validate(self._json("POST", f"/runs/{run_id}/cancel"))

    def delete(self, run_id: str) -> None:
        self._json("DELETE", f"/runs/{run_id}")

    def agents(self) -> Manifest:
        return Manifest.model_validate(self._json("GET", "/agents"))
