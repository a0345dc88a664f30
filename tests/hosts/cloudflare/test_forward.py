"""A request for a run goes to its Durable Object; a read the platform marks retryable is sent
again with a new stub, a write never is. The errors here are made as Cloudflare's are (a
JavaScript Error with ``retryable`` / ``overloaded``): the real case, a read right after
``wrangler dev`` restarts, fails with ``Network connection lost`` now and then in real workerd."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from agent_unit.hosts.cloudflare import RETRIES, forward, retryable


class PlatformError(Exception):
    def __init__(self, message: str, *, retryable: bool = False, overloaded: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.overloaded = overloaded


@dataclass
class Request:
    method: str


@dataclass
class Stub:
    failures: list[Exception]
    sent: list[str] = field(default_factory=list)

    async def fetch(self, request: Any) -> str:
        self.sent.append(request.method)
        if self.failures:
            raise self.failures.pop(0)
        return "answered"


def lost() -> PlatformError:
    return PlatformError("Network connection lost.", retryable=True)


async def test_a_read_is_sent_again_with_a_new_stub_when_the_platform_says_it_may_be() -> None:
    first, second = Stub([lost()]), Stub([])

    async def renew() -> Stub:
        return second

    assert await forward(Request("GET"), first, renew) == "answered"
    assert first.sent == ["GET"] and second.sent == ["GET"]


async def test_a_write_is_sent_once_whatever_the_error_says() -> None:
    stub = Stub([lost()])

    async def renew() -> Stub:
        return stub

    with pytest.raises(PlatformError):
        await forward(Request("POST"), stub, renew)
    assert stub.sent == ["POST"]  # a resume the object may have run is never sent twice


@pytest.mark.parametrize(
    "error",
    [PlatformError("Durable Object is overloaded.", retryable=True, overloaded=True), PlatformError("a bug")],
)
async def test_an_overloaded_object_or_an_error_of_the_code_is_not_retried(error: PlatformError) -> None:
    stub = Stub([error])

    async def renew() -> Stub:
        return stub

    with pytest.raises(PlatformError):
        await forward(Request("GET"), stub, renew)
    assert stub.sent == ["GET"] and not retryable(error)


async def test_a_read_that_keeps_failing_gives_up_after_its_attempts() -> None:
    stub = Stub([lost() for _ in range(RETRIES)])

    async def renew() -> Stub:
        return stub

    with pytest.raises(PlatformError):
        await forward(Request("GET"), stub, renew)
    assert stub.sent == ["GET"] * RETRIES
