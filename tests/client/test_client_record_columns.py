"""The columnar decoder (``decode_columns``) against the record-by-record one
(``decode_records``): every codec, headers, null keys and values, log append time,
control batches, aborted transactions under read_committed, fetch offsets inside a
batch, partial and corrupt batches."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.client.consumer.fetcher_records import (
    ConsumerRecord,
    decode_columns,
    decode_records,
    next_fetch_offset,
)
from sluice.client.errors import CorruptRecordException
from sluice.protocol.records.batch import (
    CONTROL_FLAG_MASK,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    assemble_batch,
)
from sluice.protocol.records.builder import encode_headers, encode_record
from sluice.protocol.records.columnar import RecordColumns
from sluice.protocol.records.compression import CompressionType, compress

Row = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]  # key, value, hdrs, ts


def batch(
    base_offset: int,
    rows: list[Row],
    codec: CompressionType = CompressionType.NONE,
    *,
    producer_id: int = -1,
    transactional: bool = False,
    control: bool = False,
    log_append_time: int | None = None,
    epoch: int = 3,
    gaps: int = 0,
) -> bytes:
    """A v2 batch; ``gaps`` spaces the offset deltas (compacted batches have holes)."""
    base_ts = rows[0][3]
    records = b"".join(
        encode_record(i * (gaps + 1), ts - base_ts, k, v, encode_headers(h))
        for i, (k, v, h, ts) in enumerate(rows)
    )
    attributes = int(codec)
    attributes |= TRANSACTIONAL_FLAG_MASK if transactional else 0
    attributes |= CONTROL_FLAG_MASK if control else 0
    max_ts = max(ts for *_, ts in rows)
    if log_append_time is not None:
        attributes |= TIMESTAMP_TYPE_MASK
        max_ts = log_append_time
    payload = compress(codec, records) if codec else records
    data = assemble_batch(
        base_offset,
        epoch,
        attributes,
        (len(rows) - 1) * (gaps + 1),
        base_ts,
        max_ts,
        producer_id,
        0,
        0,
        len(rows),
        payload,
    )
    return data


def marker(base_offset: int, producer_id: int, commit: bool) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    row: Row = (key, b"\x00\x00\x00\x00\x00\x00", [], 1000)
    return batch(base_offset, [row], producer_id=producer_id, transactional=True, control=True)


def as_records(columns: RecordColumns, topic: str, partition: int) -> list[ConsumerRecord]:
    headers = columns.headers.to_pylist()
    return [
        ConsumerRecord(
            topic,
            partition,
            int(o),
            int(t),
            int(tt),
            k,
            v,
            [(h["key"], h["value"]) for h in hs],
            int(e),
        )
        for o, t, tt, e, k, v, hs in zip(
            columns.offsets,
            columns.timestamps,
            columns.timestamp_types,
            columns.leader_epochs,
            columns.keys.to_pylist(),
            columns.values.to_pylist(),
            headers,
            strict=True,
        )
    ]


def same_as_one_by_one(data: bytes, fetch_offset: int = 0, **kw: object) -> list[ConsumerRecord]:
    expected, expected_next = decode_records("t", 1, data, fetch_offset, **kw)  # type: ignore[arg-type]
    columns, next_offset = decode_columns("t", 1, data, fetch_offset, **kw)  # type: ignore[arg-type]
    assert next_offset == expected_next
    assert next_fetch_offset(data, fetch_offset) == expected_next
    got = as_records(columns, "t", 1)
    assert got == expected
    return got


blobs = st.one_of(st.none(), st.binary(max_size=300))
header_lists = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))), max_size=3
)
rows = st.lists(
    st.tuples(blobs, blobs, header_lists, st.integers(0, 2**41)), min_size=1, max_size=40
)
codecs = st.sampled_from(list(CompressionType))


@settings(max_examples=150, deadline=None)
@given(
    batches=st.lists(
        st.tuples(rows, codecs, st.booleans(), st.integers(0, 2)), min_size=1, max_size=6
    ),
    cut=st.integers(0, 300),
)
def test_columns_equal_records_for_any_batches(
    batches: list[tuple[list[Row], CompressionType, bool, int]], cut: int
) -> None:
    data = b""
    offset = 0
    for rs, codec, log_append, gaps in batches:
        data += batch(offset, rs, codec, log_append_time=5_000 if log_append else None, gaps=gaps)
        offset += (len(rs) - 1) * (gaps + 1) + 1
    same_as_one_by_one(data, fetch_offset=cut % (offset + 1))
    # a response cut inside its last batch: the complete ones only
    same_as_one_by_one(data[: len(data) - 7])


@settings(max_examples=100, deadline=None)
@given(
    txns=st.lists(
        st.tuples(st.integers(1, 3), st.booleans(), st.integers(1, 4), codecs),
        min_size=1,
        max_size=8,
    ),
    plain=st.integers(0, 3),
)
def test_read_committed_drops_aborted_transactions_like_records(
    txns: list[tuple[int, bool, int, CompressionType]], plain: int
) -> None:
    """Transactions of a few producers, each committed or aborted, with its data batch
    followed by its marker; plain batches in between."""
    data = b""
    offset = 0
    aborted: list[tuple[int, int]] = []
    for i, (pid, commit, n, codec) in enumerate(txns):
        rs: list[Row] = [(b"k", b"%d-%d" % (i, j), [("h", b"v")], 1000 + j) for j in range(n)]
        data += batch(offset, rs, codec, producer_id=pid, transactional=True)
        if not commit:
            aborted.append((pid, offset))
        offset += n
        if i < plain:
            data += batch(offset, [(None, b"plain", [], 2000)])
            offset += 1
        data += marker(offset, pid, commit)
        offset += 1
    committed = same_as_one_by_one(data, aborted=aborted, read_committed=True)
    everything = same_as_one_by_one(data, aborted=aborted, read_committed=False)
    assert len(committed) <= len(everything)
    assert all(r.key is None or r.key == b"k" for r in everything)  # markers never show


def test_codecs_headers_and_nulls_each() -> None:
    rs: list[Row] = [
        (None, b"v0", [], 10),
        (b"k1", None, [("a", b"1"), ("b", None)], 12),
        (b"", b"", [("\u00e9", b"")], 11),
    ]
    for codec in CompressionType:
        got = same_as_one_by_one(batch(40, rs, codec))
        assert [r.offset for r in got] == [40, 41, 42]
        assert got[1].headers == [("a", b"1"), ("b", None)]
        assert got[2].headers == [("\u00e9", b"")]


def test_header_keys_that_are_not_utf8_decode_with_replacement() -> None:
    raw = batch(0, [(b"k", b"v", [], 1)])
    # rewrite the record by hand: one header with key bytes b"\xff"
    body = b"\x00" + b"\x00" + b"\x00" + b"\x02k" + b"\x02v" + b"\x02" + b"\x02\xff" + b"\x01"
    record = bytes([len(body) * 2]) + body
    data = assemble_batch(0, 0, 0, 0, 1, 1, -1, 0, 0, 1, record)
    assert raw  # the helper's own batch decodes as well
    got = same_as_one_by_one(data)
    assert got[0].headers == [("\ufffd", None)]


def test_corrupt_batches_fail_like_records() -> None:
    data = bytearray(batch(0, [(b"k", b"value", [], 1)] * 3))
    data[-3] ^= 0xFF
    with pytest.raises(CorruptRecordException):
        decode_records("t", 0, bytes(data), 0)
    with pytest.raises(CorruptRecordException):
        decode_columns("t", 0, bytes(data), 0)
    # the CRC not checked: a record that overruns its batch is still caught
    bad = batch(0, [(b"k", b"value", [], 1)])
    broken = bad[:-9] + b"\x7f" + bad[-8:]  # the value's length now points past the end
    with pytest.raises(CorruptRecordException):
        decode_columns("t", 0, broken, 0, check_crcs=False)


def test_empty_and_slices() -> None:
    columns, next_offset = decode_columns("t", 0, b"", 5)
    assert len(columns) == 0 and next_offset == 5
    data = batch(0, [(b"k", b"%d" % i, [], i) for i in range(10)])
    columns, _ = decode_columns("t", 0, data, 0)
    part = columns.slice(3, 6)
    assert part.offsets.tolist() == [3, 4, 5]
    assert part.values.to_pylist() == [b"3", b"4", b"5"]
    assert columns.from_offset(8).offsets.tolist() == [8, 9]


def test_impossible_lengths_and_counts_fail_fast() -> None:
    """A negative record length or a record count above the section's size is corrupt
    (the CRC not checked): an error, not a loop over the count."""
    record = encode_record(0, 0, b"k", b"v")
    negative = b"\x01" + record[1:]  # zig-zag 1: length -1
    for records, count in ((negative, 1), (record, 2**31 - 1)):
        data = assemble_batch(0, 0, 0, 0, 1, 1, -1, 0, 0, count, records)
        with pytest.raises(CorruptRecordException):
            decode_columns("t", 0, data, 0, check_crcs=False)
