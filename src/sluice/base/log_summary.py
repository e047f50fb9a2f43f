"""One log line for many partitions: the first few named, the rest counted.

An event that touches every partition of a topic (its creation, a broker's failover)
is one event for an operator, whatever the partition count: a 20,000-partition topic
must not write 20,000 lines at INFO. Its line names the first :data:`SAMPLE` items and
counts the others (each item is still logged on its own at DEBUG by the caller).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, TypeVar

__all__ = ["SAMPLE", "summarize"]

SAMPLE: Final = 10
"""Items named in a summary line."""


T = TypeVar("T")


def summarize(items: Sequence[T], describe: Callable[[T], str] = str, sample: int = SAMPLE) -> str:
    """``a, b, c`` for a few items; ``a, b, ..., j and 19990 more`` for many (only the
    items shown are described)."""
    shown = ", ".join(describe(item) for item in items[:sample])
    rest = len(items) - sample
    return f"{shown} and {rest} more" if rest > 0 else shown
