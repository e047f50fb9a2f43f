"""Leader appends of read-only buffers: heads patched, records written by pwritev, and the
stored bytes identical to the in-place rewrite of a writable copy."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.base.clock import ManualClock
from sluice.log import Log, LogConfig
from sluice.log.patched_records import PatchedRecords, pwrite_all
from sluice.protocol.records.batch import iter_batches
from support.records import build_batch


def _stored(log: Log) -> bytes:
    return b"".join(segment.log.path.read_bytes() for segment in log.segments)


def _request(sizes: list[list[int]], producer_id: int) -> bytes:
    """A produce buffer: one batch per entry of ``sizes`` (record value sizes)."""
    parts = []
    for index, values in enumerate(sizes):
        pid = producer_id if producer_id >= 0 else -1
        parts.append(
            build_batch(
                [bytes([65 + i % 26]) * n for i, n in enumerate(values)],
                producer_id=pid,
                producer_epoch=0 if pid >= 0 else -1,
                base_sequence=index * 1000 if pid >= 0 else -1,
            )
        )
    return b"".join(parts)


@settings(max_examples=40, deadline=None)
@given(
    requests=st.lists(
        st.lists(st.lists(st.integers(0, 300), min_size=1, max_size=6), min_size=1, max_size=4),
        min_size=1,
        max_size=5,
    ),
    epoch=st.integers(0, 50),
    idempotent=st.booleans(),
    segment_bytes=st.sampled_from([8000, 12_000, 1 << 20]),
)
def test_read_only_appends_store_what_in_place_appends_store(
    requests: list[list[list[int]]], epoch: int, idempotent: bool, segment_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = LogConfig(segment_bytes=segment_bytes)
        clock = ManualClock(1_000_000)
        in_place = Log(Path(tmp) / "a-0", config, clock=clock)
        patched = Log(Path(tmp) / "b-0", config, clock=clock)
        for number, sizes in enumerate(requests):
            data = _request(sizes, 7 + number if idempotent else -1)
            first = in_place.append_as_leader(bytearray(data), epoch)
            second = patched.append_as_leader(memoryview(data).toreadonly(), epoch)
            assert first == second
        assert _stored(patched) == _stored(in_place)
        assert patched.log_end_offset == in_place.log_end_offset
        offsets = [h.base_offset for h in iter_batches(_stored(patched))]
        assert offsets == sorted(offsets) and offsets[0] == 0


def test_patched_records_copy_only_heads_and_keep_the_rest_as_views() -> None:
    data = _request([[10, 20], [5]], -1)
    headers = list(iter_batches(data))
    records = PatchedRecords(memoryview(data).toreadonly(), headers)
    assert len(records) == len(data) == len(bytes(records))
    heads, rests = records.parts[0::2], records.parts[1::2]
    assert all(isinstance(h, bytearray) and len(h) == 16 for h in heads)
    assert all(isinstance(r, memoryview) and r.readonly for r in rests)
    records.head(headers[1].position)[0:8] = (42).to_bytes(8, "big")
    assert next(iter(iter_batches(bytes(records)[headers[1].position :]))).base_offset == 42


def test_pwrite_all_writes_more_parts_than_one_pwritev_takes(tmp_path: Path) -> None:
    parts: list[bytearray | memoryview] = [bytearray([i % 251]) * (i % 7 + 1) for i in range(3000)]
    parts.insert(5, bytearray())  # empty parts are skipped
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"head", 0)
        written = pwrite_all(fd, parts, 4)
    finally:
        os.close(fd)
    expected = b"".join(bytes(p) for p in parts)
    assert written == len(expected)
    assert (tmp_path / "f").read_bytes() == b"head" + expected


def test_pwrite_all_resumes_after_short_writes(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    real = os.pwritev

    def short(fd: int, buffers: list[memoryview], offset: int) -> int:  # at most 5 bytes a call
        first = bytes(buffers[0])[:5]
        return real(fd, [first], offset)

    monkeypatch.setattr(os, "pwritev", short)
    parts: list[bytearray | memoryview] = [
        bytearray(b"abcdefgh"),
        memoryview(b"ij"),
        bytearray(b"klmnopqrstu"),
    ]
    fd = os.open(tmp_path / "g", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        assert pwrite_all(fd, parts, 0) == 21
    finally:
        os.close(fd)
    assert (tmp_path / "g").read_bytes() == b"abcdefghijklmnopqrstu"
