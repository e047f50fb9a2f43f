"""Test-only helpers for the log tests: a v2 record batch encoder/decoder, a manual clock,
and :func:`attempts` for scenarios that depend on what the kernel drops (see conftest.py)."""

from __future__ import annotations

import gzip
import os
import queue
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cramjam
from crc32c import crc32c

from sluice.log import Log, LogConfig
from sluice.log.file_records import FileRecords
from sluice.log.file_work import FileWork
from sluice.protocol.records import compression

_HEADER = struct.Struct(">qiibIhiqqqhii")
ATTEMPTS = 5
SETTLE_S = 5.0


class ManualClock:
    """An injectable clock returning a settable time in milliseconds."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


@dataclass
class Rec:
    """A record to encode: value, optional key, headers and absolute timestamp."""

    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int | None = None


def varint(value: int) -> bytes:
    """Zig-zag varint/varlong encoding as in the Kafka record format."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _bytes_field(data: bytes | None) -> bytes:
    if data is None:
        return varint(-1)
    return varint(len(data)) + data


def encode_record(offset_delta: int, timestamp_delta: int, rec: Rec) -> bytes:
    body = bytearray()
    body.append(0)  # attributes
    body += varint(timestamp_delta)
    body += varint(offset_delta)
    body += _bytes_field(rec.key)
    body += _bytes_field(rec.value)
    body += varint(len(rec.headers))
    for name, value in rec.headers:
        body += _bytes_field(name.encode())
        body += _bytes_field(value)
    return varint(len(body)) + bytes(body)


def _xerial_snappy(data: bytes) -> bytes:
    header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    out = bytearray(header)
    for start in range(0, max(len(data), 1), 32 * 1024):
        chunk = bytes(cramjam.snappy.compress_raw(data[start : start + 32 * 1024]))
        out += struct.pack(">i", len(chunk)) + chunk
    return bytes(out)


def compress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return gzip.compress(data)
    if codec == 2:
        return _xerial_snappy(data)
    if codec == 3:
        return bytes(cramjam.lz4.compress(data))
    if codec == 4:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(codec)


def decompress(codec: int, data: bytes) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return gzip.decompress(data)
    if codec == 2:
        return compression.decompress(compression.CompressionType.SNAPPY, data)
    if codec == 3:
        return bytes(cramjam.lz4.decompress(data))
    return bytes(cramjam.zstd.decompress(data))


def build_batch(
    records: list[Rec] | list[bytes],
    *,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = 0,
    log_append_time: bool = False,
    transactional: bool = False,
    control: bool = False,
    default_timestamp: int = 1_700_000_000_000,
) -> bytes:
    """Encode a complete, CRC-valid magic v2 batch."""
    recs = [r if isinstance(r, Rec) else Rec(r) for r in records]
    stamps = [default_timestamp if r.timestamp is None else r.timestamp for r in recs]
    first_ts = base_timestamp if base_timestamp is not None else (stamps[0] if stamps else -1)
    payload = b"".join(
        encode_record(i, stamp - first_ts, r)
        for i, (r, stamp) in enumerate(zip(recs, stamps, strict=True))
    )
    attributes = compression | (0x08 if log_append_time else 0)
    attributes |= (0x10 if transactional else 0) | (0x20 if control else 0)
    body = struct.pack(
        ">hiqqqhii",
        attributes,
        len(recs) - 1,
        first_ts,
        max(stamps) if stamps else -1,
        producer_id,
        producer_epoch,
        base_sequence,
        len(recs),
    ) + compress(compression, payload)
    crc = crc32c(body)
    length = 4 + 1 + 4 + len(body)  # leader epoch + magic + crc + rest
    return struct.pack(">qiibI", base_offset, length, partition_leader_epoch, 2, crc) + body


@dataclass
class DecodedRecord:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def decode_batches(buf: bytes) -> list[tuple[tuple[int, ...], list[DecodedRecord]]]:
    """Fully decode every batch (test oracle): (header fields, records)."""
    out = []
    pos = 0
    while pos + 61 <= len(buf):
        fields = _HEADER.unpack_from(buf, pos)
        size = fields[1] + 12
        batch = buf[pos : pos + size]
        attributes, base_ts, max_ts = fields[5], fields[7], fields[8]
        data = decompress(attributes & 7, batch[61:])
        recs = []
        p = 0
        for _ in range(fields[12]):
            length, p = read_varint(data, p)
            end = p + length
            p += 1
            ts_delta, p = read_varint(data, p)
            off_delta, p = read_varint(data, p)
            key, p = _read_bytes(data, p)
            value, p = _read_bytes(data, p)
            n_headers, p = read_varint(data, p)
            headers = []
            for _ in range(n_headers):
                name, p = _read_bytes(data, p)
                hval, p = _read_bytes(data, p)
                headers.append(((name or b"").decode(), hval))
            timestamp = max_ts if attributes & 0x08 else base_ts + ts_delta
            recs.append(DecodedRecord(fields[0] + off_delta, timestamp, key, value, headers))
            assert p == end
            p = end
        out.append((fields, recs))
        pos += size
    return out


def _read_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(data, pos)
    if length < 0:
        return None, pos
    return data[pos : pos + length], pos + length


def values_of(buf: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in ``buf``."""
    return [(r.offset, r.value) for _, recs in decode_batches(buf) for r in recs]


def attempts(disk: Path, scenario: Callable[[Path], None]) -> None:
    """Run ``scenario`` in a fresh directory under ``disk`` until it passes, at most
    ``ATTEMPTS`` times, 0.05, 0.1, 0.2 and 0.4 s apart (a retry of what the kernel did,
    not a wait for the code under test); the last failure is raised."""
    for attempt in range(ATTEMPTS):
        try:
            scenario(disk / f"attempt-{attempt}")
            return
        except AssertionError:
            if attempt == ATTEMPTS - 1:
                raise
        time.sleep(0.05 * 2**attempt)


def segmented_log(
    directory: Path,
    clock: ManualClock,
    segments: int,
    fsync: bool = True,
    file_work: FileWork | None = None,
    **config: Any,
) -> Log:
    """A log of ``segments`` full segments of two 200-byte records each (offsets 2i and
    2i + 1 in segment i) and an active one holding offset 2 * ``segments``, all on disk
    (``fsync``, their pages left clean: :func:`settle`) or some still dirty in the page
    cache; ``config`` are further :class:`LogConfig` fields; ``file_work`` runs the log's
    background file work (inline by default). Rolls create their own files unless
    ``config`` says otherwise (``segment_prepare_next``): these scenarios count the page
    drops queued as file work, where the next segment's files would be made."""
    one = len(build_batch([Rec(b"x" * 200, timestamp=clock())]))
    config.setdefault("segment_prepare_next", False)
    log = Log(
        directory / "t-0", LogConfig(segment_bytes=2 * one, **config), clock=clock,
        file_work=file_work,
    )  # fmt: skip
    for i in range(2 * segments + 1):
        log.append_as_leader(build_batch([Rec(b"%03d" % i + b"x" * 197, timestamp=clock())]), 0)
    if fsync:
        log.flush()
        for segment in log.segments:
            os.fsync(segment.log.fileno())
            settle(segment.log)
    return log


def settle(records: FileRecords) -> None:
    """Leave the file's pages in the cache as clean copies read from the disk: drop the
    ones just written (which the kernel may keep for a few milliseconds; dropped again
    until it lets them go, for at most ``SETTLE_S``), then read the file back."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        records.cache_dropper(write_back_first=False)()  # a dropper is single-use
        if not records.cached() or time.monotonic() > deadline:
            break
    records.read(0, records.size)


class ManualFileWork:
    """Background file work (sluice.log.file_work) queued in order, as a broker's file
    thread would run it, and run when the test says (:meth:`run`)."""

    def __init__(self) -> None:
        self.work: queue.Queue[Callable[[], None]] = queue.Queue()

    @property
    def in_background(self) -> bool:
        return True

    def submit(self, work: Callable[[], None]) -> None:
        self.work.put(work)

    def run(self) -> int:
        """Run what is queued, in order; how many there were."""
        done = 0
        while not self.work.empty():
            self.work.get()()
            done += 1
        return done

    def drop(self) -> int:
        """Forget what is queued (what a killed process loses); how many there were."""
        dropped = 0
        while not self.work.empty():
            self.work.get()
            dropped += 1
        return dropped
