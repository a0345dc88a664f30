"""AG-UI text and reasoning messages from a model's output, for adapters.

Frameworks stream a response as numbered parts (text, reasoning, tool calls). A
:class:`MessageStream` turns the text and reasoning parts into AG-UI's
``TEXT_MESSAGE_*`` and ``REASONING_*`` events, opening each message on its first delta and
closing every open one at the end, so a client always sees balanced start and end events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

__all__ = ["MessageStream"]

Kind = Literal["text", "reasoning"]


class MessageStream:
    """Emit text and reasoning deltas as AG-UI messages through ``emit`` (``ctx.stream``)."""

    def __init__(self, emit: Callable[[dict[str, Any]], None]) -> None:
        self._emit = emit
        self._open: dict[str, Kind] = {}

    def text(self, message_id: str, delta: str) -> None:
        self._delta("text", message_id, delta)

    def reasoning(self, message_id: str, delta: str) -> None:
        self._delta("reasoning", message_id, delta)

    def _delta(self, kind: Kind, message_id: str, delta: str) -> None:
        if not delta:
            return
        if message_id not in self._open:
            self._open[message_id] = kind
            if kind == "text":
                self._emit({"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"})
            else:
                self._emit({"type": "REASONING_START", "messageId": message_id})
                self._emit({"type": "REASONING_MESSAGE_START", "messageId": message_id, "role": "reasoning"})
        content = "TEXT_MESSAGE_CONTENT" if kind == "text" else "REASONING_MESSAGE_CONTENT"
        self._emit({"type": content, "messageId": message_id, "delta": delta})

    def end(self, message_id: str) -> None:
        """Close one message (a part that ended); nothing if it never opened."""
        kind = self._open.pop(message_id, None)
        if kind == "text":
            self._emit({"type": "TEXT_MESSAGE_END", "messageId": message_id})
        elif kind == "reasoning":
            self._emit({"type": "REASONING_MESSAGE_END", "messageId": message_id})
            self._emit({"type": "REASONING_END", "messageId": message_id})

    def close(self) -> None:
        """Close every message still open."""
        for message_id in list(self._open):
            self.end(message_id)
