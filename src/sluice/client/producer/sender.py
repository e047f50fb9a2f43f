"""``Sender``: the producer's network thread (Kafka's ``Sender``).

Each :meth:`Sender.run_once` does what the Java client's does:

1. idempotence: resolve sequences, bump the epoch if asked, and get a producer id
   (InitProducerId) before any batch is drained;
2. ``accumulator.ready`` for the nodes with sendable data (topics without a
   known leader trigger a metadata refresh), drop nodes the network client cannot
   send to yet, ``accumulator.drain`` one request's worth per node, mute the
   drained partitions when ordering needs it (max.in.flight.requests.per.connection=1);
3. expire batches past delivery.timeout.ms, queued or in flight;
4. send one Produce request per node, grouped by topic then partition;
5. ``client.poll`` with a timeout that wakes it for the next linger expiry,
   backoff or batch expiry; responses complete batches in their callbacks.

A response error is handled by its Kafka code: retriable ones re-enqueue the batch
at the head of its deque (it waits retry.backoff.ms, exponentially more for later
attempts) until retries or delivery.timeout.ms run out; errors meaning stale
metadata also refresh it; anything else fails the batch. acks=0 requests get no
response: their batches complete (offset -1) once written.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from sluice.base import TopicPartition
from sluice.base.clock import Clock
from sluice.client.errors import (
    InvalidMetadataException,
    KafkaException,
    OutOfOrderSequenceException,
    TimeoutException,
    UnsupportedVersionException,
    exception_for,
)
from sluice.client.net.client_request import ClientRequest, ClientResponse
from sluice.client.net.metadata import Metadata
from sluice.client.net.requests import init_producer_id_request
from sluice.client.producer.accumulator import RecordAccumulator
from sluice.client.producer.produce_request import (
    PartitionResponse,
    decode_produce_response,
    encode_produce_request,
)
from sluice.client.producer.producer_batch import ProducerBatch
from sluice.client.producer.transaction_manager import TransactionManager
from sluice.protocol import ApiKey, ErrorCode

__all__ = ["Sender", "SenderConfig"]

log = logging.getLogger(__name__)

_FOREVER = 2**63 - 1


@dataclass(frozen=True)
class SenderConfig:
    """The producer settings the Sender uses."""

    acks: int = -1
    max_request_size: int = 1_048_576
    request_timeout_ms: int = 30_000
    retries: int = 2_147_483_647
    retry_backoff_ms: int = 100
    guarantee_message_order: bool = False


class Sender:
    """Drains the accumulator into Produce requests and completes batches."""

    def __init__(
        self,
        client: Any,
        metadata: Metadata,
        accumulator: RecordAccumulator,
        config: SenderConfig,
        clock: Clock,
        transaction_manager: TransactionManager | None = None,
    ) -> None:
        self.client = client
        self.metadata = metadata
        self.accumulator = accumulator
        self.config = config
        self._clock = clock
        self.transaction_manager = transaction_manager
        self.running = True
        self.force_close = False
        self.in_flight_batches: dict[TopicPartition, list[ProducerBatch]] = {}
        self._init_in_flight = False
        self._init_retry_at_ms = 0

    # -- the thread ---------------------------------------------------------------

    def run(self) -> None:
        """The network thread's body: loop until closed, then finish or abort."""
        log.debug("Starting Kafka producer I/O thread.")
        while self.running:
            self._run_once_safely()
        log.debug("Beginning shutdown of Kafka producer I/O thread, sending remaining records.")
        while not self.force_close and (
            self.accumulator.has_undrained() or self.client.has_in_flight_requests()
        ):
            if self._fatal() is not None and not self.client.has_in_flight_requests():
                break  # nothing more can be sent; the rest is aborted below
            self._run_once_safely()
        if self.force_close:
            self.accumulator.abort_incomplete_batches()
        try:
            self.client.close()
        except Exception:
            log.exception("Failed to close network client")
        # Anything still incomplete (in flight on a closed connection) has failed.
        self.accumulator.abort_incomplete_batches(self._fatal())
        log.debug("Shutdown of Kafka producer I/O thread has completed.")

    def _run_once_safely(self) -> None:
        try:
            self.run_once()
        except Exception:
            log.exception("Uncaught error in kafka producer I/O thread")

    def initiate_close(self) -> None:
        """Stop accepting records; the thread sends what is queued, then exits."""
        self.accumulator.close()
        self.running = False
        self.wakeup()

    def force_close_now(self) -> None:
        """Stop at once; queued and in-flight batches fail."""
        self.force_close = True
        self.initiate_close()

    def wakeup(self) -> None:
        self.client.wakeup()

    def _fatal(self) -> KafkaException | None:
        tm = self.transaction_manager
        return None if tm is None else tm.fatal_error

    # -- one iteration ------------------------------------------------------------

    def run_once(self) -> None:
        tm = self.transaction_manager
        now = self._clock.hi_res_clock_ms()
        if tm is not None:
            tm.maybe_resolve_sequences()
            fatal = tm.fatal_error
            if fatal is not None:
                self.accumulator.abort_undrained_batches(fatal)
                self.client.poll(self.config.retry_backoff_ms, now)
                return
            if tm.needs_init_producer_id():
                self._fail_expired_batches(now)
                self.client.poll(self._maybe_send_init_producer_id(now), now)
                return
        timeout = self.send_producer_data(now)
        self.client.poll(timeout, now)

    def send_producer_data(self, now: int) -> int:
        """Drain ready batches into requests; return how long poll may wait."""
        cluster = self.metadata.cluster
        result = self.accumulator.ready(cluster, now)
        if result.unknown_leader_topics:
            for topic in result.unknown_leader_topics:
                self.metadata.add(topic, now)
            log.debug("Requesting metadata update due to unknown leader topics from the "
                      "batched records: %s", result.unknown_leader_topics)  # fmt: skip
            self.metadata.request_update()
        ready_nodes = set(result.ready_nodes)
        not_ready_timeout = _FOREVER
        for node in result.ready_nodes:
            if not self.client.ready(node, now):
                ready_nodes.discard(node)
                not_ready_timeout = min(not_ready_timeout, self.client.poll_delay_ms(node, now))
        batches = self.accumulator.drain(cluster, ready_nodes, self.config.max_request_size, now)
        touched = ""
        for drained in batches.values():
            for batch in drained:
                tp = batch.topic_partition
                self.in_flight_batches.setdefault(tp, []).append(batch)
                if tp.topic != touched:  # topics in use do not expire from the metadata
                    touched = tp.topic
                    self.metadata.touch(touched, now)
                if self.config.guarantee_message_order:
                    self.accumulator.mute_partition(tp)
        self._fail_expired_batches(now)
        timeout = min(result.next_ready_check_delay_ms, not_ready_timeout,
                      self.accumulator.next_batch_expiry_time_ms - now)  # fmt: skip
        if any(batches.values()):
            # More may be sendable at once. (Kafka sets 0 for any ready node; a ready
            # node that yielded nothing, e.g. behind an unresolved sequence, would
            # then spin while holding the GIL.)
            timeout = 0
        for node_id, node_batches in batches.items():
            if node_batches:
                self._send_produce_request(now, node_id, node_batches)
        return max(timeout, 0)

    # -- expiry ---------------------------------------------------------------------

    def _fail_expired_batches(self, now: int) -> None:
        self.accumulator.reset_next_batch_expiry_time()
        expired = self._expired_in_flight_batches(now) + self.accumulator.expired_batches(now)
        tm = self.transaction_manager
        for batch in expired:
            message = (
                f"Expiring {batch.record_count} record(s) for {batch.topic_partition}:"
                f"{now - batch.created_ms} ms has passed since batch creation "
                f"(delivery.timeout.ms={self.accumulator.delivery_timeout_ms})"
            )
            self._fail_batch(batch, TimeoutException(message), False)
            if tm is not None and batch.in_retry():
                tm.mark_sequence_unresolved(batch)

    def _expired_in_flight_batches(self, now: int) -> list[ProducerBatch]:
        expired: list[ProducerBatch] = []
        timeout = self.accumulator.delivery_timeout_ms
        for tp, batches in list(self.in_flight_batches.items()):
            while batches:
                batch = batches[0]
                if not batch.has_reached_delivery_timeout(timeout, now):
                    self.accumulator.maybe_update_next_batch_expiry_time(batch)
                    break
                batches.pop(0)
                if not batch.is_done():
                    expired.append(batch)
            if not batches:
                del self.in_flight_batches[tp]
        return expired

    # -- requests -------------------------------------------------------------------

    def _send_produce_request(
        self, now: int, destination: int, batches: list[ProducerBatch]
    ) -> None:
        acks = self.config.acks
        by_tp: dict[TopicPartition, ProducerBatch] = {}
        topic_data: dict[str, list[tuple[int, Any]]] = {}
        for batch in batches:
            tp = batch.topic_partition
            topic_data.setdefault(tp.topic, []).append((tp.partition, batch.records()))
            by_tp[tp] = batch
            batch.in_flight = True
        timeout = self.config.request_timeout_ms

        def build(version: int) -> list[Any]:
            return encode_produce_request(version, acks, timeout, topic_data)

        def done(response: ClientResponse) -> None:
            self._handle_produce_response(response, by_tp, self._clock.hi_res_clock_ms())

        request = ClientRequest(
            destination, ApiKey.PRODUCE, build, done,
            expect_response=acks != 0, decode=decode_produce_response,
        )  # fmt: skip
        try:
            self.client.send(request, now)
        except UnsupportedVersionException as exc:
            for batch in batches:
                batch.in_flight = False
                self._fail_batch(batch, exc, False)
        log.debug("Sent produce request to node %d with %d batch(es)", destination, len(batches))

    def _handle_produce_response(
        self, response: ClientResponse, batches: dict[TopicPartition, ProducerBatch], now: int
    ) -> None:
        if response.disconnected:
            error = (
                ErrorCode.request_timed_out if response.timed_out else ErrorCode.network_exception
            )
            why = " (request.timeout.ms expired)" if response.timed_out else ""
            message = f"Disconnected from node {response.destination}{why}"
            for batch in batches.values():
                self._complete_batch(batch, PartitionResponse(error, error_message=message), now)
            return
        if response.body is None:  # acks=0
            for batch in batches.values():
                self._complete_batch(batch, PartitionResponse(ErrorCode.none), now)
            return
        results = response.body.responses
        for tp, batch in batches.items():
            partition_response = results.get(tp)
            if partition_response is None:
                partition_response = PartitionResponse(
                    ErrorCode.unknown_server_error, error_message=f"no response for {tp}"
                )
            self._complete_batch(batch, partition_response, now)

    # -- batch outcomes -----------------------------------------------------------------

    def _complete_batch(self, batch: ProducerBatch, response: PartitionResponse, now: int) -> None:
        batch.in_flight = False
        error = response.error
        tm = self.transaction_manager
        if error is ErrorCode.none:
            self._complete_batch_success(batch, response)
        elif self._can_retry(batch, response, now):
            log.warning(
                "Got error produce response on topic-partition %s, retrying (%d attempts "
                "left). Error: %s", batch.topic_partition,
                self.config.retries - batch.attempts - 1, error.name.upper(),
            )  # fmt: skip
            if tm is None or tm.has_producer_id_and_epoch(batch.producer_id, batch.producer_epoch):
                self._reenqueue_batch(batch, now)
            else:
                current = tm.producer_id_and_epoch.producer_id
                self._fail_batch(batch, OutOfOrderSequenceException(
                    f"Attempted to retry sending a batch but the producer id changed from "
                    f"{batch.producer_id} to {current} in the mean time. This batch will be "
                    "dropped."), False)  # fmt: skip
        elif error is ErrorCode.duplicate_sequence_number:
            # The broker has it already but not its offset: report success.
            self._complete_batch_success(batch, response)
        else:
            exception = exception_for(error, response.error_message)
            if error is ErrorCode.message_too_large:
                exception = exception_for(error, response.error_message or (
                    f"The batch of {batch.record_count} record(s) for {batch.topic_partition} "
                    "is larger than the broker accepts (message.max.bytes / max.message.bytes)"
                ))  # fmt: skip
            self._fail_batch(batch, exception, batch.attempts < self.config.retries)
        if error is not ErrorCode.none and isinstance(
            exception_for(error), InvalidMetadataException
        ):
            log.warning("Received invalid metadata error in produce request on partition %s "
                        "due to %s. Going to request metadata update now",
                        batch.topic_partition, error.name.upper())  # fmt: skip
            self.metadata.request_update()
        if self.config.guarantee_message_order:
            self.accumulator.unmute_partition(batch.topic_partition)

    def _can_retry(self, batch: ProducerBatch, response: PartitionResponse, now: int) -> bool:
        if batch.has_reached_delivery_timeout(self.accumulator.delivery_timeout_ms, now):
            return False
        if batch.attempts >= self.config.retries or batch.is_done():
            return False
        tm = self.transaction_manager
        if tm is None:
            return bool(response.error.retriable)
        return tm.can_retry(response.error, response.log_start_offset, batch)

    def _reenqueue_batch(self, batch: ProducerBatch, now: int) -> None:
        self.accumulator.reenqueue(batch, now)
        self._remove_from_in_flight_batches(batch)

    def _complete_batch_success(self, batch: ProducerBatch, response: PartitionResponse) -> None:
        tm = self.transaction_manager
        if tm is not None:
            tm.handle_completed_batch(batch, response.base_offset)
        if batch.complete(response.base_offset, response.log_append_time):
            self._remove_and_deallocate(batch)

    def _fail_batch(self, batch: ProducerBatch, exception: Exception, adjust: bool) -> None:
        if batch.complete_exceptionally(exception):
            tm = self.transaction_manager
            if tm is not None:
                try:
                    tm.handle_failed_batch(batch, exception, adjust)
                except Exception:
                    log.exception("Error handling failed batch of %s", batch.topic_partition)
            self._remove_and_deallocate(batch)

    def _remove_from_in_flight_batches(self, batch: ProducerBatch) -> None:
        batches = self.in_flight_batches.get(batch.topic_partition)
        if batches is not None:
            with contextlib.suppress(ValueError):
                batches.remove(batch)
            if not batches:
                del self.in_flight_batches[batch.topic_partition]

    def _remove_and_deallocate(self, batch: ProducerBatch) -> None:
        self._remove_from_in_flight_batches(batch)
        self.accumulator.deallocate(batch)

    # -- InitProducerId ---------------------------------------------------------------

    def _maybe_send_init_producer_id(self, now: int) -> int:
        """Ask a broker for a producer id if none is pending; return the poll timeout."""
        tm = self.transaction_manager
        assert tm is not None
        backoff = self.config.retry_backoff_ms
        if self._init_in_flight:
            return self.config.request_timeout_ms
        if now < self._init_retry_at_ms:
            return self._init_retry_at_ms - now
        node = self.client.least_loaded_node(now)
        if node is None or not self.client.ready(node, now):
            return backoff
        try:
            version = self.client.latest_usable_version(node.id, ApiKey.INIT_PRODUCER_ID)
        except UnsupportedVersionException as exc:
            tm.transition_to_fatal_error(UnsupportedVersionException(
                f"{exc}. The idempotent producer (enable.idempotence=true, the default) needs "
                "InitProducerId; set enable.idempotence=false to produce without it."
            ))  # fmt: skip
            return 0

        def done(response: ClientResponse) -> None:
            self._init_in_flight = False
            if response.disconnected or not tm.handle_init_producer_id_response(response.body):
                self._init_retry_at_ms = self._clock.hi_res_clock_ms() + backoff

        self._init_in_flight = True
        self.client.send(
            ClientRequest(node.id, ApiKey.INIT_PRODUCER_ID,
                          lambda v: init_producer_id_request(v), done, version=version),
            now,
        )  # fmt: skip
        return self.config.request_timeout_ms
