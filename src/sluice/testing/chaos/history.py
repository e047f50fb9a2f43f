"""What happened during a chaos run, as Jepsen records it: every write a producer
attempted and how it ended, and every record a consumer read.

A written value names its writer, partition and sequence number
(``b"<writer>:<partition>:<seq>:"``, padded to the run's record size), so a value read
back says by itself which write it is. A *writer* is one producer instance: a producer
that has to be replaced (a fatal idempotence error) comes back as a new writer, whose
sequence numbers start at 0 again.

How a write ends:

- *acknowledged* (:class:`Ack`): the broker answered it with an offset; it must be in
  the log, once, at that offset, in the writer's order.
- *failed* (:class:`Failure`): the client gave up (a timeout, an error). The write is
  indeterminate: it may or may not be in the log, as Jepsen's ``:info``.
- neither: the run ended with it still pending (counted as failed).

A read (:class:`Read`) is a record a consumer saw at an offset: during the run (a
tailing consumer) or in the final read of every partition from its start to its high
watermark. A record the final reader could not decode (a checksum error) is a read with
``value=None``.

:class:`History` is the recorder the producer and consumer threads write to; it is a
plain collection of events, and :mod:`sluice.testing.chaos.checker` judges it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

__all__ = [
    "Ack",
    "Failure",
    "FaultEvent",
    "History",
    "Read",
    "Write",
    "decode_value",
    "encode_value",
]


@dataclass(frozen=True, slots=True, order=True)
class Write:
    """One value a writer sent: the ``seq``-th to ``partition``."""

    writer: int
    partition: int
    seq: int


@dataclass(frozen=True, slots=True)
class Ack:
    """``write`` was acknowledged at ``offset`` of its partition."""

    write: Write
    offset: int


@dataclass(frozen=True, slots=True)
class Failure:
    """``write`` failed (indeterminate: it may still have been appended)."""

    write: Write
    error: str


@dataclass(frozen=True, slots=True)
class Read:
    """A record read at ``offset`` of ``partition`` by ``reader`` (``final``: the read of
    every partition after the faults). ``value`` None: the record could not be decoded."""

    reader: str
    partition: int
    offset: int
    value: bytes | None
    final: bool


@dataclass(frozen=True, slots=True)
class FaultEvent:
    """A fault injected or healed, ``at`` seconds after the run began."""

    at: float
    text: str


def encode_value(write: Write, size: int = 0) -> bytes:
    """``b"<writer>:<partition>:<seq>:"`` padded with ``.`` to ``size`` bytes."""
    text = f"{write.writer}:{write.partition}:{write.seq}:".encode()
    return text.ljust(size, b".")


def decode_value(value: bytes) -> Write | None:
    """The write a value came from, or None for a value no writer sent (a corrupt one)."""
    parts = value.split(b":", 3)
    if len(parts) != 4:
        return None
    try:
        writer, partition, seq = (int(p) for p in parts[:3])
    except ValueError:
        return None
    if min(writer, partition, seq) < 0 or parts[3].strip(b".") != b"":
        return None
    return Write(writer, partition, seq)


@dataclass
class History:
    """The events of one run, appended from any thread."""

    sent: list[Write] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    faults: list[FaultEvent] = field(default_factory=list)
    final_read_complete: dict[int, bool] = field(default_factory=dict)
    """Per partition: whether the final read reached the high watermark."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record_sent(self, write: Write) -> None:
        with self._lock:
            self.sent.append(write)

    def record_ack(self, write: Write, offset: int) -> None:
        with self._lock:
            self.acks.append(Ack(write, offset))

    def record_failure(self, write: Write, error: str) -> None:
        with self._lock:
            self.failures.append(Failure(write, error))

    def record_read(
        self, reader: str, partition: int, offset: int, value: bytes | None, *, final: bool
    ) -> None:
        with self._lock:
            self.reads.append(Read(reader, partition, offset, value, final))

    def record_fault(self, at: float, text: str) -> None:
        with self._lock:
            self.faults.append(FaultEvent(at, text))

    @property
    def acked_count(self) -> int:
        return len(self.acks)
