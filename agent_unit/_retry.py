"""``RetryPolicy``: how ``run.step(name, fn, retry=...)`` tries a step again when it raises.

As Temporal activities and DBOS steps have: a number of attempts, a backoff that grows by a
multiplier up to a ceiling, and the exception types worth retrying. The attempts run inside the
one execution with the same idempotency key; only the final outcome is journaled.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._durations import Duration, parse_duration

__all__ = ["RetryPolicy"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``RetryPolicy(attempts=5, initial="1s", multiplier=2, max_delay="1m", retry_on=(TimeoutError,))``.

    ``attempts`` counts the first try (1 is no retry). The wait before attempt ``n + 1`` is
    ``initial * multiplier ** (n - 1)``, at most ``max_delay``. Only exceptions of the types in
    ``retry_on`` are retried; any other fails the step at once.
    """

    attempts: int = 3
    initial: Duration = 1.0
    multiplier: float = 2.0
    max_delay: Duration = 60.0
    retry_on: tuple[type[Exception], ...] = (Exception,)

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 1:
            raise ValueError(f"RetryPolicy(attempts={self.attempts!r}): attempts counts the first try, at least 1")
        if self.multiplier < 1:
            raise ValueError(f"RetryPolicy(multiplier={self.multiplier!r}): use 1 (a fixed wait) or more")
        retry_on = self.retry_on if isinstance(self.retry_on, tuple) else (self.retry_on,)
        if not retry_on or not all(isinstance(t, type) and issubclass(t, Exception) for t in retry_on):
            raise ValueError(f"RetryPolicy(retry_on={self.retry_on!r}): give Exception subclasses")
        object.__setattr__(self, "retry_on", retry_on)
        parse_duration(self.initial)  # a bad duration is refused here, where it was written
        parse_duration(self.max_delay)

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based) before the next one."""
        initial = parse_duration(self.initial).total_seconds()
        ceiling = parse_duration(self.max_delay).total_seconds()
        return min(ceiling, initial * self.multiplier ** (attempt - 1))

    def retries(self, exc: BaseException, attempt: int) -> bool:
        """Whether failed attempt ``attempt`` (1-based) that raised ``exc`` is tried again."""
        return attempt < self.attempts and isinstance(exc, self.retry_on)
