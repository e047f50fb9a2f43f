"""The measures a quota is checked against: Kafka's ``Rate`` over a ``SampledStat`` and
its ``TokenBucket``.

As in Kafka's metrics library, a rate is the sum of the values recorded in the last
``samples`` windows of ``window_ms`` each, divided by the time those windows cover
(:meth:`Rate.window_size_ms`): the elapsed time since the oldest window began, but never
less than ``samples - 1`` whole windows, so a burst in the first moments after a quiet
spell is not measured as a huge rate. A window whose start is ``samples * window_ms``
old is forgotten. A :class:`TokenBucket` (the controller mutation quota) holds up to
``samples * window_s * rate`` tokens, refilled at ``rate`` per second; what is recorded
takes tokens and may leave the bucket negative.

Plain objects on a millisecond clock the caller passes in: no locking, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MetricConfig", "Rate", "Sample", "TokenBucket"]


@dataclass(frozen=True, slots=True)
class MetricConfig:
    """How a measure is windowed (Kafka's ``MetricConfig``: ``quota.window.num`` samples
    of ``quota.window.size.seconds``)."""

    samples: int = 11
    window_ms: int = 1000

    def __post_init__(self) -> None:
        if self.samples < 1 or self.window_ms < 1:
            raise ValueError("a metric needs at least one sample of at least 1 ms")


class Sample:
    """One window: the sum recorded in it and when it began."""

    __slots__ = ("event_count", "last_window_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.last_window_ms = now_ms

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.last_window_ms = now_ms

    def is_complete(self, now_ms: int, config: MetricConfig) -> bool:
        return now_ms - self.last_window_ms >= config.window_ms


class Rate:
    """A windowed sum per second (Kafka's ``Rate`` over a ``WindowedSum``)."""

    __slots__ = ("_current", "_samples", "config")

    def __init__(self, config: MetricConfig) -> None:
        self.config = config
        self._samples: list[Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if sample.is_complete(now_ms, self.config):
            sample = self._advance(now_ms)
        sample.value += value
        sample.event_count += 1

    def measure(self, now_ms: int) -> float:
        """The rate per second at ``now_ms``."""
        total = self.total(now_ms)
        return total / (self.window_size_ms(now_ms) / 1000.0)

    def total(self, now_ms: int) -> float:
        """The sum over the windows not yet forgotten."""
        self._purge_obsolete(now_ms)
        return sum(s.value for s in self._samples)

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate is measured over (never less than ``samples - 1`` windows)."""
        self._purge_obsolete(now_ms)
        config = self.config
        elapsed = now_ms - self._oldest(now_ms).last_window_ms
        full_windows = elapsed // config.window_ms
        least = config.samples - 1
        if full_windows < least:
            elapsed += (least - full_windows) * config.window_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> Sample:
        if not self._samples:
            self._samples.append(Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> Sample:
        self._current = (self._current + 1) % self.config.samples
        if self._current >= len(self._samples):
            sample = Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _oldest(self, now_ms: int) -> Sample:
        if not self._samples:
            self._samples.append(Sample(now_ms))
        return min(self._samples, key=lambda s: s.last_window_ms)

    def _purge_obsolete(self, now_ms: int) -> None:
        """Forget the windows that began ``samples * window_ms`` ago or earlier."""
        expire_age = self.config.samples * self.config.window_ms
        for sample in self._samples:
            if now_ms - sample.last_window_ms >= expire_age:
                sample.reset(now_ms)


class TokenBucket:
    """Kafka's ``TokenBucket``: up to ``samples * window_s * rate`` tokens, refilled at
    ``rate`` per second; recording takes tokens, possibly below zero."""

    __slots__ = ("_last_update_ms", "config", "tokens")

    def __init__(self, config: MetricConfig) -> None:
        self.config = config
        self.tokens = 0.0
        self._last_update_ms: int | None = None

    def burst(self, rate: float) -> float:
        return self.config.samples * (self.config.window_ms / 1000.0) * rate

    def measure(self, rate: float, now_ms: int) -> float:
        """The tokens left at ``now_ms`` under ``rate`` per second."""
        self._refill(rate, now_ms)
        return self.tokens

    def record(self, value: float, rate: float, now_ms: int) -> None:
        self._refill(rate, now_ms)
        self.tokens = min(self.burst(rate), self.tokens - value)

    def _refill(self, rate: float, now_ms: int) -> None:
        burst = self.burst(rate)
        if self._last_update_ms is None:  # a new bucket starts full, as Kafka's does
            self.tokens = burst
        else:
            elapsed_s = max(now_ms - self._last_update_ms, 0) / 1000.0
            self.tokens = min(burst, self.tokens + rate * elapsed_s)
        self._last_update_ms = now_ms
