"""``define_agent``: a plain async function becomes an agent with a typed input and output.

The first parameter's annotation (a pydantic model, TypedDict, dataclass or plain type)
validates the input and gives the agent's JSON Schema; the return annotation validates the
output. The second parameter, if present, receives the :class:`~agent_unit.run.Run`.
``limits`` are what each run of the agent may spend, below the deployment's ``[limits]``.
A framework's agent given to ``define_agent`` keeps these options (:class:`FrameworkAgent`) until
its adapter is found.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from functools import cached_property
from typing import Any, cast, overload

from pydantic import TypeAdapter, ValidationError

from ._limits import Limits
from .errors import InvalidInput

__all__ = ["Agent", "FrameworkAgent", "define_agent"]

AgentFn = Callable[..., Awaitable[Any]]
LimitsArg = Limits | Mapping[str, Any] | None


class Agent:
    """A durable agent: the function, its description and its input and output types."""

    framework = "plain"

    def __init__(
        self, fn: AgentFn, *, name: str | None = None, description: str | None = None, limits: LimitsArg = None
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"define_agent needs an async function; {fn.__qualname__} is not `async def`")
        signature = inspect.signature(fn, eval_str=True)
        params = [p for p in signature.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if not 1 <= len(params) <= 2:
            raise TypeError(f"agent {fn.__qualname__} must take (input) or (input, run), not {len(params)} parameters")
        self.fn = fn
        self.name = name
        self.limits: Limits | None = limits if isinstance(limits, Limits) or limits is None else Limits(**limits)
        """What each run of this agent may spend; the deployment's ``[limits]`` still hold (the lower wins)."""
        self.description = description if description is not None else inspect.getdoc(fn) or ""
        self._takes_run = len(params) == 2
        input_type = params[0].annotation
        output_type = signature.return_annotation
        self.input_adapter: TypeAdapter[Any] = TypeAdapter(Any if input_type is inspect.Parameter.empty else input_type)
        self.output_adapter: TypeAdapter[Any] = TypeAdapter(
            Any if output_type is inspect.Signature.empty else output_type
        )

    def __repr__(self) -> str:
        return f"<Agent {self.name or self.fn.__qualname__}>"

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        return self.input_adapter.json_schema()

    @cached_property
    def output_schema(self) -> dict[str, Any]:
        return self.output_adapter.json_schema(mode="serialization")

    def validate_input(self, raw: Any) -> Any:
        """The input as the agent receives it; ``InvalidInput`` (with pydantic's errors) otherwise."""
        try:
            return self.input_adapter.validate_python(raw)
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_context=False)
            first = errors[0]
            where = ".".join(str(part) for part in first["loc"]) or "input"
            raise InvalidInput(
                f"invalid input for agent {self.name!r}: {where}: {first['msg']}"
                + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
                details=errors,
            ) from None

    def dump_input(self, value: Any) -> Any:
        return self.input_adapter.dump_python(value, mode="json")

    def dump_output(self, value: Any) -> Any:
        """The output as JSON data, validated by the return annotation."""
        return self.output_adapter.dump_python(self.output_adapter.validate_python(value), mode="json")

    async def __call__(self, input: Any, run: Any) -> Any:
        return await (self.fn(input, run) if self._takes_run else self.fn(input))


class FrameworkAgent:
    """A framework's agent (a PydanticAI ``Agent``, a LangGraph graph...) with the options
    ``define_agent`` gave it: its adapter runs it, as the agent's :attr:`Agent.limits` say."""

    def __init__(self, value: Any, *, description: str | None, limits: Limits | None) -> None:
        self.value = value
        self.description = description
        self.limits = limits

    def apply(self, agent: Agent) -> Agent:
        """``agent`` (the adapted value) with these options."""
        agent.limits = self.limits
        if self.description is not None:
            agent.description = self.description
        return agent


@overload
def define_agent(
    fn: AgentFn, /, *, name: str | None = None, description: str | None = None, limits: LimitsArg = None
) -> Agent: ...


@overload
def define_agent(
    fn: object, /, *, name: str | None = None, description: str | None = None, limits: LimitsArg = None
) -> Agent | FrameworkAgent: ...


@overload
def define_agent(
    *, name: str | None = None, description: str | None = None, limits: LimitsArg = None
) -> Callable[[AgentFn], Agent]: ...


def define_agent(
    fn: object = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    limits: LimitsArg = None,
) -> Agent | FrameworkAgent | Callable[[AgentFn], Agent]:
    """Make ``fn`` an agent: ``@define_agent``, ``@define_agent(description=...)`` or ``define_agent(fn)``.

    ``limits`` (``{"total_tokens": 50_000}``, or a :class:`~agent_unit._limits.Limits`): what each
    run of it may spend; the deployment's ``[limits]`` hold too (the lower of each wins), and a
    start request may only lower them. ``define_agent(framework_agent, limits=...)`` gives a
    framework's agent (an object, not a function) the same options; its adapter runs it."""
    own = limits if isinstance(limits, Limits) or limits is None else Limits(**limits)
    if fn is None:
        return lambda fn: Agent(fn, name=name, description=description, limits=own)
    if _framework(fn):
        return FrameworkAgent(fn, description=description, limits=own)
    return Agent(cast(AgentFn, fn), name=name, description=description, limits=own)


def _framework(value: object) -> bool:
    """An object a framework made (a PydanticAI agent, a LangGraph graph), not an agent function."""
    if isinstance(value, Agent | functools.partial):
        return False
    return not (inspect.isroutine(value) or inspect.iscoroutinefunction(value))
