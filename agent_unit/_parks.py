"""The signals that unwind an agent when its run stops executing for now.

Parking (an interrupt, a sleep, a budget yield, a cancellation) raises a :class:`Park`, a
``BaseException``, so an ``except Exception:`` in user code cannot swallow it. They are control
flow, not errors: the engine catches them and saves the run's new status. They live apart from
:mod:`agent_unit.run` (which raises them from the primitives) and :mod:`agent_unit._execution`
(which raises them when the run is cancelled or out of budget), so neither imports the other.
"""

from __future__ import annotations

from ._records import Interrupt, JournalEntry

__all__ = ["Cancelled", "Interrupted", "Park", "Sleeping", "Yielded"]


class Park(BaseException):
    """Unwinds the agent when the run stops executing for now. Never catch it."""


class Interrupted(Park):
    def __init__(self, interrupt: Interrupt) -> None:
        super().__init__(f"interrupted at {interrupt.name!r}")
        self.interrupt = interrupt


class Sleeping(Park):
    def __init__(self, wake_at: float, entry: JournalEntry | None) -> None:
        super().__init__(f"sleeping until {wake_at}")
        self.wake_at = wake_at
        self.entry = entry  # the journal entry to write with the park (first time only)


class Yielded(Park):
    """The budget is spent: continue in a fresh invocation."""


class Cancelled(Park):
    """The run was cancelled, or this process lost its lease (or its store): it saves nothing more."""
