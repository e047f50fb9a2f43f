"""MemoryRecordsBuilder: v2 batches read back by kio's and kafka-python's readers."""

from __future__ import annotations

import datetime
import io

import pytest
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch
from kio.static.primitive import i8, i16, i32, i64

from sluice.client.producer.accumulator import CompressionRatioEstimator
from sluice.protocol.records.batch import BATCH_HEADER_SIZE
from sluice.protocol.records.builder import (
    MemoryRecordsBuilder,
    encode_headers,
    estimate_size_in_bytes_upper_bound,
)
from sluice.protocol.records.compression import CompressionType, compress, decompress
from sluice.protocol.records.varint import encode_varint
from support.records import read_batches

T0 = 1_700_000_000_123


def _kio_batch(records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]]):
    buf = io.BytesIO()
    write_new_batch(
        buf,
        NewRecordBatch(
            producer_id=i64(-1),
            producer_epoch=i16(-1),
            base_sequence=i32(-1),
            partition_leader_epoch=i32(-1),
            attributes=i16(0),
            records=tuple(
                Record(
                    attributes=i8(0),
                    timestamp=datetime.datetime.fromtimestamp(ts / 1000, datetime.UTC),
                    offset=i64(i),
                    key=key,
                    value=value,
                    headers=tuple(RecordHeader(key=k.encode(), value=v) for k, v in headers),
                )
                for i, (ts, key, value, headers) in enumerate(records)
            ),
        ),
    )
    return buf.getvalue()


def test_encode_varints_match_kafka() -> None:
    assert encode_varint(0) == b"\x00"
    assert encode_varint(-1) == b"\x01"
    assert encode_varint(1) == b"\x02"
    assert encode_varint(63) == b"\x7e"
    assert encode_varint(64) == b"\x80\x01"
    assert encode_varint(-(2**63)) == b"\xff" * 9 + b"\x01"


def test_uncompressed_batch_is_byte_identical_to_kios_writer() -> None:
    records = [
        (T0, b"k0", b"v0", [("h", b"x")]),
        (T0 + 5, None, b"value-1", []),
        (T0 + 2, b"k2", None, [("a", b""), ("b", b"yy")]),
        (T0 + 9000, b"", b"v" * 300, []),
    ]
    builder = MemoryRecordsBuilder(bytearray(4096))
    for ts, key, value, headers in records:
        assert builder.try_append(ts, key, value, encode_headers(headers)) > 0
    assert bytes(builder.close()) == _kio_batch(records)


@pytest.mark.parametrize("codec", list(CompressionType))
def test_every_codec_reads_back_in_kafka_python(codec: CompressionType) -> None:
    builder = MemoryRecordsBuilder(bytearray(1 << 16), codec)
    expected = []
    for i in range(200):
        key, value = f"key-{i}".encode(), f"value {i} ".encode() * 5
        builder.try_append(T0 + i, key, value, encode_headers([("n", str(i).encode())]))
        expected.append((i, T0 + i, key, value, [("n", str(i).encode())]))
    (batch,) = read_batches(builder.close())
    assert batch["compression"] == int(codec)
    assert batch["records"] == expected
    if codec != CompressionType.NONE:
        assert builder.compression_ratio < 0.5


def test_producer_state_is_written_and_rewritten_with_a_new_crc() -> None:
    builder = MemoryRecordsBuilder(bytearray(1024))
    builder.try_append(T0, None, b"a", b"\x00")
    builder.try_append(T0, None, b"b", b"\x00")
    builder.set_producer_state(42, 3, 7, False)
    (batch,) = read_batches(builder.close())
    assert (batch["producer_id"], batch["producer_epoch"], batch["base_sequence"]) == (42, 3, 7)
    builder.set_producer_state(42, 4, 0, False)  # an epoch bump after sealing
    (batch,) = read_batches(builder.close())
    assert (batch["producer_epoch"], batch["base_sequence"]) == (4, 0)


def test_appends_stop_at_the_write_limit_but_the_first_record_always_fits() -> None:
    builder = MemoryRecordsBuilder(bytearray(200))
    assert builder.try_append(T0, None, b"x" * 50, b"\x00") > 0
    assert builder.try_append(T0, None, b"x" * 50, b"\x00") > 0
    assert builder.try_append(T0, None, b"x" * 50, b"\x00") == 0  # would pass 200 bytes
    assert builder.num_records == 2
    big = MemoryRecordsBuilder(bytearray(estimate_size_in_bytes_upper_bound(0, 5000, 1)))
    assert big.try_append(T0, None, b"y" * 5000, b"\x00") > 0
    assert big.try_append(T0, None, b"y" * 5000, b"\x00") == 0


def test_compressed_batches_estimate_their_size_and_grow_off_the_pooled_buffer() -> None:
    pooled = bytearray(1024)
    builder = MemoryRecordsBuilder(pooled, CompressionType.GZIP, estimated_compression_ratio=0.1)
    count = 0
    while builder.try_append(T0, None, b"z" * 100, b"\x00"):
        count += 1
    assert count > 50  # far more than 1 KiB of uncompressed records
    assert builder.buffer is not pooled  # the pooled buffer was never resized
    assert len(pooled) == 1024
    (batch,) = read_batches(builder.close())
    assert len(batch["records"]) == count


def test_a_closed_or_empty_builder() -> None:
    builder = MemoryRecordsBuilder(bytearray(BATCH_HEADER_SIZE + 10))
    with pytest.raises(ValueError, match="empty"):
        builder.close()
    builder.close_for_record_appends()
    assert builder.try_append(T0, None, b"", b"\x00") == 0
    with pytest.raises(ValueError):
        MemoryRecordsBuilder(bytearray(10))


def test_snappy_uses_xerial_framing_and_all_codecs_round_trip() -> None:
    data = b"0123456789" * 10_000  # more than one 32 KiB xerial block
    framed = compress(CompressionType.SNAPPY, data)
    assert framed.startswith(b"\x82SNAPPY\x00")
    for codec in CompressionType:
        assert decompress(codec, compress(codec, data)) == data
    lz4 = compress(CompressionType.LZ4, data)
    assert lz4[4] & 0x20  # FLG: independent blocks, as Kafka's Java LZ4 reader needs


def test_compression_ratio_estimator_moves_like_kafkas() -> None:
    estimator = CompressionRatioEstimator()
    assert estimator.estimation("t") == 1.0
    assert estimator.update_estimation("t", 0.5) == pytest.approx(0.995)
    assert estimator.update_estimation("t", 2.0) == 2.0
    assert estimator.update_estimation("t", 1.0) == pytest.approx(1.995)


def test_headers_accept_pairs_and_dicts_and_reject_str_values() -> None:
    assert encode_headers(None) == b"\x00"
    assert encode_headers({"a": b"1"}) == encode_headers([("a", b"1")])
    assert encode_headers([(b"raw", None)]) == b"\x02\x06raw\x01"
    with pytest.raises(TypeError, match="bytes or None"):
        encode_headers([("a", "text")])
