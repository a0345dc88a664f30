"""A run on an event loop whose timers have no ``when()``: Pyodide's WebLoop (Python Workers)
returns a plain ``asyncio.Handle`` from ``call_at``, and a run there must not depend on more."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agent_unit import Run, RunEngine, define_agent
from agent_unit.stores.memory import MemoryStore


class _Untimed(asyncio.Handle):
    """What Pyodide's WebLoop gives back from ``call_at``: a plain ``Handle``, with no ``when()``."""

    def __init__(self, timer: asyncio.TimerHandle, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(lambda: None, (), loop)
        self._timer = timer

    def cancel(self) -> None:
        super().cancel()
        self._timer.cancel()


class WebLoopLike(asyncio.SelectorEventLoop):
    def call_at(self, when: float, callback: Callable[..., Any], *args: Any, context: Any = None) -> Any:
        return _Untimed(super().call_at(when, callback, *args, context=context), self)


@define_agent
async def slow_steps(input: int, run: Run) -> int:
    total = 0
    for index in range(input):

        async def work(index: int = index) -> int:
            await asyncio.sleep(0.001)  # done before its STEP_STARTED flush: the next step finds the timer armed
            return index

        total += await run.step(f"part-{index}", work)
    return total


def test_a_run_completes_on_a_loop_whose_timers_have_no_when_as_in_pyodide() -> None:
    async def main() -> tuple[str, Any]:
        engine = RunEngine({"slow": slow_steps}, store=MemoryStore(), background_sweep=False)
        record = await engine.start("slow", 4)
        done = await engine.wait(record.id)
        await engine.aclose()
        return done.status.value, done.output

    with asyncio.Runner(loop_factory=WebLoopLike) as runner:
        assert runner.run(main()) == ("completed", 6)
