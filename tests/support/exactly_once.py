"""The exactly-once check of a copying pipeline: every record of the input is in the
output once, and the output holds nothing else.

Both sides are lists of ``(partition, value)`` as read from the topics (the input in
full, the output with ``read_committed``); values are unique in the input (numbered
writes). A value found in another output partition than its input one counts as
misplaced; order within a partition is reported, not judged.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ExactlyOnce", "check_exactly_once"]


@dataclass(frozen=True)
class ExactlyOnce:
    """What :func:`check_exactly_once` found."""

    inputs: int
    outputs: int
    missing: tuple[bytes, ...]
    duplicated: dict[bytes, int]
    """Output values seen more than once, with their counts."""
    unexpected: tuple[bytes, ...]
    misplaced: tuple[bytes, ...]
    in_order: bool
    """Whether each output partition lists its values in their input order."""

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicated or self.unexpected or self.misplaced)

    def summary(self) -> str:
        return (
            f"{self.inputs} in, {self.outputs} out: {len(self.missing)} missing, "
            f"{len(self.duplicated)} duplicated, {len(self.unexpected)} unexpected, "
            f"{len(self.misplaced)} in another partition, "
            f"{'in order' if self.in_order else 'NOT in input order'}"
        )


def check_exactly_once(
    inputs: Iterable[tuple[int, bytes]], outputs: Iterable[tuple[int, bytes]]
) -> ExactlyOnce:
    """Compare the input and output records (``(partition, value)`` in log order)."""
    inputs, outputs = list(inputs), list(outputs)
    where = {value: partition for partition, value in inputs}
    if len(where) != len(inputs):
        raise ValueError("input values must be unique")
    counts = Counter(value for _, value in outputs)
    position = {value: i for i, (_, value) in enumerate(inputs)}
    by_partition: dict[int, list[int]] = defaultdict(list)
    for partition, value in outputs:
        if value in position:
            by_partition[partition].append(position[value])
    return ExactlyOnce(
        inputs=len(inputs),
        outputs=len(outputs),
        missing=tuple(v for _, v in inputs if v not in counts),
        duplicated={v: n for v, n in counts.items() if n > 1},
        unexpected=tuple(v for v in counts if v not in where),
        misplaced=tuple(v for p, v in outputs if v in where and where[v] != p),
        in_order=all(seq == sorted(seq) for seq in by_partition.values()),
    )
