"""Record batch header handling: parsing, validation errors, in-place rewrites."""

from __future__ import annotations

import struct

import pytest
from kio.records.readers import read_batch

from sluice.log.errors import (
    CorruptRecordException,
    RecordTooLargeException,
    UnsupportedForMessageFormatException,
)
from sluice.log.record_scan import record_offsets_and_timestamps
from sluice.protocol.records import batch as b
from support.records import Rec, build_batch, decode_batches


def _batch(n: int = 3, **kw: object) -> bytes:
    return build_batch([Rec(b"value-%d" % i, key=b"k", timestamp=1000 + i) for i in range(n)], **kw)  # type: ignore[arg-type]


def test_helper_encoder_is_readable_by_kio() -> None:
    data = build_batch(
        [Rec(b"v1", key=b"k1", headers=[("h", b"x")], timestamp=5), Rec(None, timestamp=9)],
        base_offset=7,
    )
    batch, size = read_batch(memoryview(data), 0)
    assert size == len(data)
    assert [r.value for r in batch.records] == [b"v1", None]
    assert [r.offset for r in batch.records] == [7, 8]
    assert batch.max_timestamp == 9


def test_read_header_fields() -> None:
    data = _batch(3, base_offset=42, partition_leader_epoch=7, producer_id=11, producer_epoch=2,
                  base_sequence=5)  # fmt: skip
    h = b.read_header(data)
    assert (h.position, h.base_offset, h.magic, h.records_count) == (0, 42, 2, 3)
    assert h.batch_length == len(data) - 12 and h.size_in_bytes == len(data)
    assert (h.last_offset, h.next_offset) == (44, 45)
    assert (h.base_timestamp, h.max_timestamp) == (1000, 1002)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (11, 2, 5)
    assert h.partition_leader_epoch == 7 and h.has_producer_id
    assert h.crc == b.compute_crc(data, 0, len(data))
    with pytest.raises(CorruptRecordException):
        b.read_header(data[:60])


def test_attribute_helpers() -> None:
    for codec in range(5):
        assert b.read_header(_batch(compression=codec)).compression_type == codec
    h = b.read_header(_batch(transactional=True, control=True, log_append_time=True))
    assert h.is_transactional and h.is_control
    assert h.timestamp_type is b.TimestampType.LOG_APPEND_TIME
    plain = b.read_header(_batch()).attributes
    assert b.timestamp_type(plain) is b.TimestampType.CREATE_TIME
    assert not b.is_transactional(plain) and not b.is_control(plain)
    assert b.compression_type(plain) == b.CompressionType.NONE


def test_iter_batches_stops_at_partial_tail() -> None:
    data = _batch(1) + _batch(2) + _batch(3)
    headers = list(b.iter_batches(data))
    assert [h.records_count for h in headers] == [1, 2, 3]
    assert headers[1].position == headers[0].end_position
    assert len(list(b.iter_batches(data[:-1]))) == 2
    assert len(list(b.iter_batches(data, headers[1].position))) == 2


def test_validate_records_accepts_valid_buffer() -> None:
    data = _batch(1) + _batch(5, compression=4)
    headers = b.validate_records(data, 1_000_000)
    assert [h.records_count for h in headers] == [1, 5]
    assert b.validate_records(b"") == []


def _error(data: bytes | bytearray, max_bytes: int | None = None) -> str:
    with pytest.raises(Exception) as info:
        b.validate_records(data, max_bytes)
    return info.value.error_name  # type: ignore[attr-defined,no-any-return]


def test_bad_crc_is_corrupt_message() -> None:
    data = bytearray(_batch())
    data[-1] ^= 0xFF
    assert _error(data) == "CORRUPT_MESSAGE"
    assert isinstance(b.batch_error(data), CorruptRecordException)


def test_bad_magic() -> None:
    data = bytearray(_batch())
    data[16] = 1
    assert _error(data) == "UNSUPPORTED_FOR_MESSAGE_FORMAT"
    assert isinstance(b.batch_error(data), UnsupportedForMessageFormatException)
    data[16] = 7
    assert _error(data) == "CORRUPT_MESSAGE"


def test_truncated_and_inconsistent_lengths() -> None:
    data = _batch()
    assert _error(data[:-5]) == "CORRUPT_MESSAGE"
    assert _error(data[:8]) == "CORRUPT_MESSAGE"
    assert _error(data + b"\x00" * 3) == "CORRUPT_MESSAGE"
    bad = bytearray(data)
    struct.pack_into(">i", bad, 8, 10)  # length smaller than a header
    assert _error(bad) == "CORRUPT_MESSAGE"
    bad = bytearray(data)
    struct.pack_into(">i", bad, 8, len(data))  # claims more bytes than present
    assert _error(bad) == "CORRUPT_MESSAGE"


def test_negative_counts_are_corrupt() -> None:
    data = bytearray(_batch())
    struct.pack_into(">i", data, 57, -1)
    struct.pack_into(">I", data, 17, b.compute_crc(data, 0, len(data)))
    assert _error(data) == "CORRUPT_MESSAGE"


def test_oversized_batch_is_message_too_large() -> None:
    data = _batch(10)
    assert _error(data, len(data) - 1) == "MESSAGE_TOO_LARGE"
    assert isinstance(b.batch_error(data, 0, len(data) - 1), RecordTooLargeException)
    assert b.batch_error(data, 0, len(data)) is None


def test_partial_tail_allowed_for_followers() -> None:
    one, two = _batch(1), _batch(2)
    headers = b.validate_records(one + two[:30], allow_partial_tail=True)
    assert len(headers) == 1
    headers = b.validate_records(one + two[:5], allow_partial_tail=True)
    assert len(headers) == 1
    bad = bytearray(one + two)
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordException):
        b.validate_records(bad, allow_partial_tail=True)


def test_set_base_offset_and_epoch_keep_crc_valid() -> None:
    data = bytearray(_batch(3))
    b.set_base_offset(data, 0, 1234)
    b.set_partition_leader_epoch(data, 0, 9)
    (h,) = b.validate_records(data)
    assert (h.base_offset, h.partition_leader_epoch) == (1234, 9)
    assert [r.offset for r in decode_batches(bytes(data))[0][1]] == [1234, 1235, 1236]


def test_set_log_append_time_recomputes_crc() -> None:
    data = bytearray(_batch(3))
    assert b.set_log_append_time(data, 0, 99_999)
    (h,) = b.validate_records(data)
    assert h.max_timestamp == 99_999
    assert h.timestamp_type is b.TimestampType.LOG_APPEND_TIME
    assert not b.set_log_append_time(data, 0, 99_999)
    assert [r.timestamp for r in decode_batches(bytes(data))[0][1]] == [99_999] * 3


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_record_scan_all_codecs(codec: int) -> None:
    recs = [Rec(b"x" * 50, timestamp=t) for t in (50, 10, 70, 70)]
    data = build_batch(recs, base_offset=100, compression=codec)
    assert record_offsets_and_timestamps(data) == [(100, 50), (101, 10), (102, 70), (103, 70)]


def test_record_scan_undecodable_returns_none() -> None:
    data = bytearray(build_batch([b"abc"], compression=4))
    data[61:] = b"\x00" * (len(data) - 61)
    assert record_offsets_and_timestamps(bytes(data)) is None
