"""The checker: plain functions over a recorded :class:`History`, no I/O.

:func:`check` finds, Jepsen-style, what a Kafka cluster with ``acks=all``, idempotent
producers, ``min.insync.replicas`` = 2 and clean leader election only must never do:

- **lost**: a write acknowledged with an offset is not in the final log.
- **duplicated**: a value is in the final log at more than one offset (each value is
  sent once; an idempotent producer's retries must not append it twice).
- **reordered**: two acknowledged writes of one writer to one partition are in the
  final log (or were acknowledged) in the opposite order to the one they were sent in.
- **vanished**: a consumer read a value during the run (so it was below the high
  watermark: committed) and it is not in the final log.
- **changed**: an offset held different values over the run (its acknowledgement, the
  reads during the run and the final read disagree), or a write was seen at one offset
  and ends at another.
- **bad read**: a record that could not be decoded (a checksum error), a value no
  writer sent to that partition, or a partition the final read could not read up to its
  high watermark.

Writes that failed are indeterminate, as Jepsen's ``:info``: they may or may not be in
the log, but once there they count like any other (once, in place, in order).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from sluice.testing.chaos.history import History, Read, Write, decode_value

__all__ = ["KINDS", "Anomaly", "CheckResult", "check", "describe_offsets"]

KINDS = ("lost", "duplicated", "reordered", "vanished", "changed", "bad read")
"""The anomaly kinds, in the order the report shows them."""


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One violation: its kind, partition, the offsets involved and what was seen."""

    kind: str
    partition: int
    offsets: tuple[int, ...]
    detail: str


@dataclass(frozen=True)
class CheckResult:
    """What :func:`check` found in one history."""

    acked: int
    failed: int
    """Writes that failed or never completed (indeterminate)."""
    final_records: int
    anomalies: tuple[Anomaly, ...]

    @property
    def ok(self) -> bool:
        return not self.anomalies

    def count(self, kind: str) -> int:
        return sum(1 for a in self.anomalies if a.kind == kind)

    def of_kind(self, kind: str) -> list[Anomaly]:
        return [a for a in self.anomalies if a.kind == kind]


def describe_offsets(offsets: Iterable[int]) -> str:
    """``[3, 4, 5, 9]`` -> ``"3-5, 9"``."""
    ranges: list[str] = []
    ordered = sorted(set(offsets))
    for _, group in itertools.groupby(enumerate(ordered), lambda item: item[1] - item[0]):
        run = [o for _, o in group]
        ranges.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ", ".join(ranges)


def _name(write: Write) -> str:
    return f"{write.writer}:{write.partition}:{write.seq}"


class _FinalLog:
    """The final read, per partition: offset -> write, and write -> offsets."""

    def __init__(self, reads: Iterable[Read], sent: set[Write], out: list[Anomaly]) -> None:
        self.at: dict[tuple[int, int], Write] = {}
        self.where: dict[Write, list[tuple[int, int]]] = defaultdict(list)
        self.records = 0
        seen: set[tuple[int, int]] = set()
        for read in reads:
            key = (read.partition, read.offset)
            if key in seen:  # the final reader met an offset twice: keep the first
                continue
            seen.add(key)
            self.records += 1
            write = _known(read, sent, out)
            if write is not None:
                self.at[key] = write
                self.where[write].append(key)


def _known(read: Read, sent: set[Write], out: list[Anomaly]) -> Write | None:
    """The write a read value is, or None after noting a bad read."""
    when = "final read" if read.final else f"read by {read.reader}"
    if read.value is None:
        out.append(Anomaly("bad read", read.partition, (read.offset,), f"{when}: undecodable"))
        return None
    write = decode_value(read.value)
    if write is None or write.partition != read.partition or write not in sent:
        shown = read.value[:40]
        out.append(
            Anomaly("bad read", read.partition, (read.offset,), f"{when}: unknown value {shown!r}")
        )
        return None
    return write


def check(history: History) -> CheckResult:
    """Judge ``history``; see the module docstring for what counts."""
    anomalies: list[Anomaly] = []
    sent = set(history.sent)
    final = _FinalLog((r for r in history.reads if r.final), sent, anomalies)
    live_reads = [r for r in history.reads if not r.final]
    live: list[tuple[Read, Write]] = []
    for read in live_reads:
        write = _known(read, sent, anomalies)
        if write is not None:
            live.append((read, write))

    for partition, complete in sorted(history.final_read_complete.items()):
        if not complete:
            anomalies.append(
                Anomaly("bad read", partition, (), "final read did not reach the high watermark")
            )
    anomalies += _lost(history, final)
    anomalies += _duplicated(final)
    anomalies += _reordered(history, final)
    anomalies += _vanished(live, final)
    anomalies += _changed(history, live, final)
    settled = {a.write for a in history.acks}
    failed = len(sent - settled)
    return CheckResult(
        acked=len(settled),
        failed=failed,
        final_records=final.records,
        anomalies=tuple(anomalies),
    )


def _lost(history: History, final: _FinalLog) -> list[Anomaly]:
    out = []
    for ack in history.acks:
        if ack.write not in final.where:
            p = ack.write.partition
            note = "" if history.final_read_complete.get(p, True) else " (final read incomplete)"
            detail = f"{_name(ack.write)} acknowledged at {ack.offset}, not in the log{note}"
            out.append(Anomaly("lost", p, (ack.offset,), detail))
    return out


def _duplicated(final: _FinalLog) -> list[Anomaly]:
    out = []
    for write, keys in final.where.items():
        offsets = tuple(sorted(o for _, o in keys))
        for extra in offsets[1:]:
            detail = f"{_name(write)} at offsets {describe_offsets(offsets)}"
            out.append(Anomaly("duplicated", write.partition, (offsets[0], extra), detail))
    return out


def _reordered(history: History, final: _FinalLog) -> list[Anomaly]:
    """Adjacent acknowledged writes of one writer and partition, in sequence order, whose
    final offsets or acknowledged offsets go backwards."""
    acked: dict[tuple[int, int], dict[int, int]] = defaultdict(dict)
    for ack in history.acks:
        acked[(ack.write.writer, ack.write.partition)][ack.write.seq] = ack.offset
    first = {write: min(o for _, o in keys) for write, keys in final.where.items()}
    out = []
    for (writer, partition), offsets in sorted(acked.items()):
        for a, b in itertools.pairwise(sorted(offsets)):
            wa, wb = Write(writer, partition, a), Write(writer, partition, b)
            fa, fb = first.get(wa), first.get(wb)
            if fa is not None and fb is not None and fb < fa:
                where = f"final offsets {fa}, {fb}"
            elif 0 <= offsets[b] < offsets[a]:
                where = f"acknowledged at {offsets[a]}, {offsets[b]}"
            else:
                continue
            detail = f"{_name(wa)} then {_name(wb)}: {where}"
            out.append(Anomaly("reordered", partition, (offsets[a], offsets[b]), detail))
    return out


def _vanished(live: list[tuple[Read, Write]], final: _FinalLog) -> list[Anomaly]:
    out = []
    reported: set[Write] = set()
    for read, write in live:
        if write not in final.where and write not in reported:
            reported.add(write)
            detail = f"{_name(write)} read at {read.offset} by {read.reader}, not in the final log"
            out.append(Anomaly("vanished", read.partition, (read.offset,), detail))
    return out


def _changed(history: History, live: list[tuple[Read, Write]], final: _FinalLog) -> list[Anomaly]:
    """Offsets whose observations disagree, and writes observed away from their final
    offset; one anomaly per offset."""
    seen: dict[tuple[int, int], set[Write]] = defaultdict(set)
    for ack in history.acks:
        if ack.offset >= 0:
            seen[(ack.write.partition, ack.offset)].add(ack.write)
    for read, write in live:
        seen[(read.partition, read.offset)].add(write)
    out = []
    for key, writes in sorted(seen.items()):
        final_write = final.at.get(key)
        values = writes | ({final_write} if final_write is not None else set())
        moved = [w for w in writes if w in final.where and key not in final.where[w]]
        if len(values) > 1 or moved:
            partition, offset = key
            shown = ", ".join(_name(w) for w in sorted(writes))
            now = _name(final_write) if final_write is not None else "nothing"
            detail = f"offset {offset}: saw {shown}; final log has {now}"
            if moved:
                elsewhere = describe_offsets(o for w in moved for _, o in final.where[w])
                detail += f"; {', '.join(_name(w) for w in moved)} now at {elsewhere}"
            out.append(Anomaly("changed", partition, (offset,), detail))
    return out
