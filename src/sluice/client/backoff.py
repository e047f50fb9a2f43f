"""``ExponentialBackoff``: Kafka's backoff with jitter (KIP-580), for retries and reconnects."""

from __future__ import annotations

import math
import random

__all__ = ["ExponentialBackoff"]


class ExponentialBackoff:
    """``initial * multiplier**attempts`` capped at ``maximum``, times a random factor
    in [1 - jitter, 1 + jitter]. With ``maximum <= initial`` it is constant."""

    __slots__ = ("_exp_max", "_initial", "_jitter", "_maximum", "_multiplier")

    def __init__(self, initial: int, multiplier: float, maximum: int, jitter: float) -> None:
        self._initial = initial
        self._multiplier = multiplier
        self._maximum = maximum
        self._jitter = jitter
        self._exp_max = (
            math.log(maximum / max(initial, 1)) / math.log(multiplier)
            if maximum > initial and multiplier > 1
            else 0.0
        )

    def backoff(self, attempts: int) -> int:
        """The delay in ms before attempt number ``attempts + 1`` (0-based attempts)."""
        if self._exp_max == 0:
            return self._initial
        exp = min(max(attempts, 0), self._exp_max)
        term = self._initial * self._multiplier**exp
        factor = 1.0 if self._jitter <= 0 else random.uniform(1 - self._jitter, 1 + self._jitter)
        return min(int(factor * term), self._maximum)
