"""Sender on a manual clock with a mock network client (Kafka's SenderTest)."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.base import TopicPartition
from sluice.base.clock import ManualClock
from sluice.client.errors import (
    InvalidRecordException,
    NotEnoughReplicasException,
    RecordTooLargeException,
    TimeoutException,
    UnsupportedVersionException,
)
from sluice.client.net.metadata import Metadata
from sluice.client.net.requests import build
from sluice.client.producer.accumulator import AccumulatorConfig, RecordAccumulator
from sluice.client.producer.buffer_pool import BufferPool
from sluice.client.producer.produce_request import PartitionResponse
from sluice.client.producer.producer_batch import FutureRecordMetadata, RecordMetadata
from sluice.client.producer.sender import Sender, SenderConfig
from sluice.client.producer.transaction_manager import TransactionManager
from sluice.protocol import ApiKey, ErrorCode
from sluice.protocol.apis import response_type
from support.mock_client import NODE1, MockClient, cluster
from support.records import read_batches

TP0 = TopicPartition("t", 0)
CLUSTER = cluster(("t", 0, NODE1), ("t", 1, NODE1))
OK = PartitionResponse(ErrorCode.none, base_offset=100)


class Harness:
    def __init__(self, *, idempotent: bool = False, acks: int = -1, retries: int = 1000,
                 max_in_flight: int = 5, delivery_timeout_ms: int = 120_000,
                 versions: dict[int, tuple[int, int]] | None = None) -> None:  # fmt: skip
        self.clock = ManualClock(1_000)
        self.client = MockClient(versions)
        self.metadata = Metadata(self.clock)
        self.metadata.cluster = CLUSTER
        self.tm = TransactionManager() if idempotent else None
        self.pool = BufferPool(64 * 1024, 1024, self.clock)
        config = AccumulatorConfig(
            batch_size=1024, linger_ms=0, retry_backoff_ms=100, retry_backoff_max_ms=100,
            delivery_timeout_ms=delivery_timeout_ms, adaptive_partitioning=False,
            backoff_jitter=0,
        )  # fmt: skip
        self.accumulator = RecordAccumulator(config, self.pool, self.clock, self.tm)
        self.sender = Sender(
            self.client, self.metadata, self.accumulator,
            SenderConfig(acks=acks, retries=retries, retry_backoff_ms=100,
                         guarantee_message_order=max_in_flight == 1),
            self.clock, self.tm,
        )  # fmt: skip

    def send(self, value: bytes = b"value", tp: TopicPartition = TP0,
             callback: Any = None) -> FutureRecordMetadata:  # fmt: skip
        result = self.accumulator.append(
            tp.topic, tp.partition, 1_700_000_000_000, None, value, b"\x00", callback, 0,
            self.clock.hi_res_clock_ms(), CLUSTER,
        )  # fmt: skip
        return result.future

    def produce_requests(self) -> int:
        return sum(1 for request, _, _ in self.client.sent if request.api_key == ApiKey.PRODUCE)

    def init_producer_id(self, producer_id: int = 5, epoch: int = 0) -> None:
        self.sender.run_once()
        request, version, _ = self.client.sent[-1]
        assert request.api_key == ApiKey.INIT_PRODUCER_ID
        self.client.respond(
            build(response_type(ApiKey.INIT_PRODUCER_ID, version), throttle_time=0,
                  error_code=ErrorCode.none, producer_id=producer_id, producer_epoch=epoch)
        )  # fmt: skip
        self.sender.run_once()  # completes InitProducerId
        self.sender.run_once()  # drains with the producer id


def test_batches_are_sent_and_completed_with_their_offsets() -> None:
    h = Harness()
    calls: list[tuple[RecordMetadata | None, Exception | None]] = []
    futures = [h.send(b"a", callback=lambda m, e: calls.append((m, e))), h.send(b"b")]
    h.sender.run_once()
    (records,) = h.client.produce_batches().values()
    assert [r[3] for r in read_batches(records)[0]["records"]] == [b"a", b"b"]
    h.client.respond_produce({TP0: OK})
    h.sender.run_once()
    assert [f.get(0).offset for f in futures] == [100, 101]
    assert calls == [(RecordMetadata("t", 0, 100, 1_700_000_000_000), None)]
    assert h.pool.available_memory() == h.pool.total_memory
    assert h.pool.free_size() == 1  # the batch buffer is back on the free list
    assert h.sender.in_flight_batches == {}


def test_requests_group_batches_by_node_topic_and_partition() -> None:
    h = Harness()
    h.send(tp=TopicPartition("t", 0))
    h.send(tp=TopicPartition("t", 1))
    h.sender.run_once()
    assert h.produce_requests() == 1
    assert set(h.client.produce_batches()) == {TopicPartition("t", 0), TopicPartition("t", 1)}


def test_retriable_errors_are_retried_after_backoff_and_refresh_metadata() -> None:
    h = Harness()
    future = h.send()
    h.sender.run_once()
    h.client.respond_produce({TP0: PartitionResponse(ErrorCode.not_leader_or_follower)})
    h.sender.run_once()
    assert not future.done()
    assert h.metadata.update_requested()
    assert h.produce_requests() == 1  # backing off
    h.clock.advance(99)
    h.sender.run_once()
    assert h.produce_requests() == 1
    h.clock.advance(1)
    h.sender.run_once()
    assert h.produce_requests() == 2
    h.client.respond_produce({TP0: OK})
    h.sender.run_once()
    assert future.get(0).offset == 100


def test_non_retriable_errors_fail_the_batch_with_the_kafka_named_exception() -> None:
    h = Harness()
    errors: list[Exception | None] = []
    future = h.send(callback=lambda m, e: errors.append(e))
    h.sender.run_once()
    h.client.respond_produce(
        {TP0: PartitionResponse(ErrorCode.invalid_record, error_message="bad")}
    )
    h.sender.run_once()
    with pytest.raises(InvalidRecordException, match="bad"):
        future.get(0)
    assert isinstance(errors[0], InvalidRecordException)
    assert h.pool.available_memory() == h.pool.total_memory


def test_retries_run_out() -> None:
    h = Harness(retries=1)
    future = h.send()
    for _ in range(2):
        h.sender.run_once()
        h.client.respond_produce({TP0: PartitionResponse(ErrorCode.not_enough_replicas)})
        h.sender.run_once()
        h.clock.advance(100)
    with pytest.raises(NotEnoughReplicasException):
        future.get(0)


def test_message_too_large_fails_with_record_too_large() -> None:
    h = Harness()
    future = h.send()
    h.sender.run_once()
    h.client.respond_produce({TP0: PartitionResponse(ErrorCode.message_too_large)})
    h.sender.run_once()
    with pytest.raises(RecordTooLargeException, match="larger than the broker accepts"):
        future.get(0)


def test_acks_zero_completes_once_written_without_offsets() -> None:
    h = Harness(acks=0)
    future = h.send()
    h.sender.run_once()
    request, _, _ = h.client.sent[0]
    assert not request.expect_response
    h.sender.run_once()
    assert future.get(0).offset == -1


def test_a_disconnect_is_retried() -> None:
    h = Harness()
    future = h.send()
    h.sender.run_once()
    h.client.respond(None, disconnected=True)
    h.sender.run_once()
    h.clock.advance(100)
    h.sender.run_once()
    h.client.respond_produce({TP0: OK})
    h.sender.run_once()
    assert future.get(0).offset == 100


def test_delivery_timeout_fails_an_in_flight_batch_and_ignores_its_late_response() -> None:
    h = Harness(delivery_timeout_ms=1_000)
    future = h.send()
    h.sender.run_once()
    h.clock.advance(1_000)
    h.sender.run_once()
    with pytest.raises(TimeoutException, match="Expiring 1 record"):
        future.get(0)
    assert h.pool.available_memory() == h.pool.total_memory
    assert h.pool.free_size() == 0  # still referenced by the request: not reused
    h.client.respond_produce({TP0: OK})
    h.sender.run_once()  # the late answer changes nothing
    with pytest.raises(TimeoutException):
        future.get(0)


def test_one_request_in_flight_mutes_the_partition() -> None:
    h = Harness(max_in_flight=1)
    h.send()
    h.sender.run_once()
    second = h.send()
    h.sender.run_once()
    assert h.accumulator.is_muted(TP0)
    assert h.produce_requests() == 1
    h.client.respond_produce({TP0: OK})
    h.sender.run_once()  # the response unmutes the partition
    assert not h.accumulator.is_muted(TP0)
    assert h.produce_requests() == 1
    h.sender.run_once()
    assert h.produce_requests() == 2
    h.client.respond_produce({TP0: PartitionResponse(ErrorCode.none, base_offset=101)})
    h.sender.run_once()
    assert second.get(0).offset == 101


def test_idempotent_producer_gets_an_id_then_numbers_sequences() -> None:
    h = Harness(idempotent=True)
    h.send(b"a")
    h.send(b"b")
    h.sender.run_once()
    assert h.produce_requests() == 0  # nothing goes before InitProducerId
    h.init_producer_id(producer_id=5)
    (first,) = read_batches(h.client.produce_batches()[TP0])
    assert (first["producer_id"], first["producer_epoch"], first["base_sequence"]) == (5, 0, 0)
    h.send(b"c")
    h.sender.run_once()
    (second,) = read_batches(h.client.produce_batches()[TP0])
    assert second["base_sequence"] == 2


def test_duplicate_sequence_counts_as_success() -> None:
    h = Harness(idempotent=True)
    future = h.send()
    h.init_producer_id()
    h.client.respond_produce({TP0: PartitionResponse(ErrorCode.duplicate_sequence_number)})
    h.sender.run_once()
    assert future.get(0).offset == -1


def test_out_of_order_sequence_bumps_the_epoch_and_resends_from_zero() -> None:
    h = Harness(idempotent=True)
    first = h.send(b"a" * 600)
    second = h.send(b"b" * 600)  # its own batch
    h.init_producer_id(producer_id=9)
    h.sender.run_once()  # the second batch goes in a second request
    assert h.produce_requests() == 2
    gap = PartitionResponse(ErrorCode.out_of_order_sequence_number, log_start_offset=0)
    h.client.respond_produce({TP0: gap})
    h.client.respond_produce({TP0: gap})
    h.sender.run_once()  # handles both responses: the first batch is the next expected
    h.sender.run_once()  # so the epoch is bumped before anything else is drained
    assert h.tm is not None and h.tm.producer_id_and_epoch == (9, 1)  # bumped locally
    h.clock.advance(100)
    h.sender.run_once()
    (resent,) = read_batches(h.client.produce_batches()[TP0])
    assert (resent["producer_epoch"], resent["base_sequence"]) == (1, 0)
    assert resent["records"][0][3] == b"a" * 600
    h.client.respond_produce({TP0: OK})
    h.sender.run_once()
    h.sender.run_once()
    (next_batch,) = read_batches(h.client.produce_batches()[TP0])
    assert (next_batch["producer_epoch"], next_batch["base_sequence"]) == (1, 1)
    h.client.respond_produce({TP0: PartitionResponse(ErrorCode.none, base_offset=101)})
    h.sender.run_once()
    assert (first.get(0).offset, second.get(0).offset) == (100, 101)


def test_a_broker_without_init_producer_id_fails_idempotent_sends_clearly() -> None:
    h = Harness(idempotent=True, versions={ApiKey.PRODUCE: (3, 11)})
    future = h.send()
    h.sender.run_once()
    h.sender.run_once()
    with pytest.raises(UnsupportedVersionException, match=r"enable\.idempotence=false"):
        future.get(0)
    assert h.tm is not None and h.tm.has_fatal_error()
