"""``Producer``: Kafka's producer for Python (the Java client's ``KafkaProducer``).

    with Producer({"bootstrap.servers": "127.0.0.1:9092"}) as producer:
        future = producer.send("events", b"payload", key=b"user-1")
        metadata = future.get(timeout=10)    # RecordMetadata(topic, partition, offset, timestamp)

``send`` is asynchronous: it waits for the topic's metadata (up to
``max.block.ms``), picks the partition (murmur2 of the key, or the sticky
partitioner), appends the record to the :class:`~.accumulator.RecordAccumulator`
and returns a :class:`~.producer_batch.FutureRecordMetadata`. One network thread
(the :class:`~.sender.Sender`) batches, sends and retries. As in the Java client,
errors a broker could return (``ApiException``: a record too large, a metadata or
memory timeout, ...) do not raise from ``send``: they fail the returned future and
call the callback; misuse (a value that is not bytes, a closed producer) raises.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Iterable, Mapping
from time import time_ns as _time_ns
from types import TracebackType
from typing import Any

from sluice.base import TopicPartition
from sluice.base.clock import SYSTEM_CLOCK, Clock
from sluice.client.errors import (
    ApiException,
    InvalidTopicException,
    KafkaException,
    RecordTooLargeException,
    SerializationException,
    TimeoutException,
    TopicAuthorizationException,
)
from sluice.client.net.cluster import Cluster, PartitionInfo
from sluice.client.net.metadata import Metadata
from sluice.client.net.network_client import NetworkClient
from sluice.client.producer.accumulator import (
    UNKNOWN_PARTITION,
    AccumulatorConfig,
    RecordAccumulator,
)
from sluice.client.producer.buffer_pool import BufferPool
from sluice.client.producer.partitioner import murmur2
from sluice.client.producer.producer_batch import (
    Callback,
    FutureRecordMetadata,
    ProduceRequestResult,
)
from sluice.client.producer.producer_config import ProducerConfig
from sluice.client.producer.sender import Sender, SenderConfig
from sluice.client.producer.transaction_manager import (
    ProducerIdAndEpoch,
    TransactionManager,
)
from sluice.client.producer.transactions import (
    PreparedTxnState,
    ProducerTransactions,
    TransactionCoordinatorClient,
)
from sluice.client.security import ClientSecurity
from sluice.protocol.errors import ErrorCode
from sluice.protocol.records.builder import encode_headers, estimate_size_in_bytes_upper_bound

__all__ = ["Producer"]

log = logging.getLogger(__name__)

Headers = Iterable[tuple[str | bytes, bytes | None]] | Mapping[str, bytes | None]
_NO_HEADERS = b"\x00"


class Producer:
    """Sends records to Kafka topics; thread-safe, one network thread per producer."""

    def __init__(self, config: Mapping[str, Any], *, clock: Clock | None = None) -> None:
        self.config = cfg = ProducerConfig(config)
        self._clock = clock or SYSTEM_CLOCK
        self.client_id = cfg.client_id
        self._max_block_ms: int = cfg["max.block.ms"]
        self._max_request_size: int = cfg["max.request.size"]
        self._total_memory: int = cfg["buffer.memory"]
        self._partitioner = cfg["partitioner.class"]
        self._ignore_keys: bool = cfg["partitioner.ignore.keys"]
        self._key_serializer = cfg["key.serializer"]
        self._value_serializer = cfg["value.serializer"]
        self._metadata = Metadata(
            self._clock,
            cfg["retry.backoff.ms"],
            cfg["retry.backoff.max.ms"],
            cfg["metadata.max.age.ms"],
            cfg["metadata.max.idle.ms"],
        )
        self._metadata.bootstrap(cfg.bootstrap)
        security = ClientSecurity.from_config(cfg.values)  # security.protocol, ssl.*
        self._transaction_manager = (
            TransactionManager(cfg.transactional_id is not None) if cfg.idempotence else None
        )
        self._txn: ProducerTransactions | None = None
        if cfg.transactional_id is not None:
            self._txn = ProducerTransactions(
                TransactionCoordinatorClient(
                    cfg["bootstrap.servers"], self.client_id, cfg.transactional_id,
                    self._max_block_ms, cfg["request.timeout.ms"], security,
                ),
                cfg["transaction.timeout.ms"],
            )  # fmt: skip
        self._accumulator = RecordAccumulator(
            AccumulatorConfig(
                batch_size=cfg["batch.size"],
                compression=cfg.compression,
                compression_level=cfg.compression_level,
                linger_ms=cfg["linger.ms"],
                retry_backoff_ms=cfg["retry.backoff.ms"],
                retry_backoff_max_ms=cfg["retry.backoff.max.ms"],
                delivery_timeout_ms=cfg.delivery_timeout_ms,
                adaptive_partitioning=cfg["partitioner.adaptive.partitioning.enable"],
            ),
            BufferPool(self._total_memory, cfg["batch.size"], self._clock),
            self._clock,
            self._transaction_manager,
        )
        self._client = NetworkClient(
            self._metadata,
            self._clock,
            client_id=self.client_id,
            max_in_flight_requests_per_connection=cfg["max.in.flight.requests.per.connection"],
            request_timeout_ms=cfg["request.timeout.ms"],
            reconnect_backoff_ms=cfg["reconnect.backoff.ms"],
            reconnect_backoff_max_ms=cfg["reconnect.backoff.max.ms"],
            connection_setup_timeout_ms=cfg["socket.connection.setup.timeout.ms"],
            send_buffer_bytes=cfg["send.buffer.bytes"],
            receive_buffer_bytes=cfg["receive.buffer.bytes"],
            ssl_context=security.ssl_context,
            sasl=security.sasl,
        )
        self._sender = Sender(
            self._client,
            self._metadata,
            self._accumulator,
            SenderConfig(
                acks=cfg.acks,
                max_request_size=self._max_request_size,
                request_timeout_ms=cfg["request.timeout.ms"],
                retries=cfg["retries"],
                retry_backoff_ms=cfg["retry.backoff.ms"],
                guarantee_message_order=cfg["max.in.flight.requests.per.connection"] == 1,
            ),
            self._clock,
            self._transaction_manager,
        )
        self._serializers = self._key_serializer is not None or self._value_serializer is not None
        # Records whose key + value + headers exceed this cannot fit in a request
        # (or in buffer.memory) even alone.
        self._payload_limit = min(self._max_request_size, self._total_memory) - (
            estimate_size_in_bytes_upper_bound(0, 0, 0)
        )
        self._append = self._accumulator.append
        self._wakeup = self._client.wakeup
        self._closed = False
        self._close_lock = threading.Lock()
        self._io_thread = threading.Thread(
            target=self._sender.run,
            name=f"kafka-producer-network-thread | {self.client_id}",
            daemon=True,
        )
        self._io_thread.start()
        log.debug("Kafka producer %s started (idempotence %s)", self.client_id, cfg.idempotence)

    # -- sending -------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Headers | None = None,
        callback: Callback | None = None,
    ) -> FutureRecordMetadata:
        """Queue a record for ``topic``; return a future of its :class:`RecordMetadata`.

        ``timestamp`` is in ms since the epoch (default: now); ``headers`` are
        (str, bytes | None) pairs or a dict; ``callback(metadata, exception)`` runs
        on the network thread when the record's batch completes.

        :raises KafkaException: the producer is closed, or idempotence failed fatally.
        :raises SerializationException: key or value is not bytes (and no serializer).
        :raises ValueError: a negative timestamp or partition.
        """
        if self._closed:
            raise KafkaException("Cannot perform operation after producer has been closed")
        tm = self._transaction_manager
        if tm is not None and tm.fatal_error is not None:
            raise tm.fatal_error
        txn = self._txn
        if txn is not None:
            txn.check_send()
        if self._serializers:
            key, value = self._serialize(topic, key, value)
        if key is not None and key.__class__ is not bytes:
            key = _as_bytes(key, "key")
        if value is not None and value.__class__ is not bytes:
            value = _as_bytes(value, "value")
        header_bytes = encode_headers(headers) if headers else _NO_HEADERS
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        elif timestamp < 0:
            raise ValueError(f"Invalid timestamp: {timestamp}. Timestamp should always be "
                             "non-negative or None.")  # fmt: skip
        if partition is not None and partition < 0:
            raise ValueError(f"Invalid partition: {partition}. Partition number should always "
                             "be non-negative or None.")  # fmt: skip
        now = self._clock.hi_res_clock_ms()
        try:
            cluster = self._metadata.cluster
            count = cluster.partition_counts.get(topic)
            waited = 0
            if count is None or (partition is not None and partition >= count):
                cluster, waited = self._wait_on_metadata(topic, partition, now, self._max_block_ms)
                count = cluster.partition_count_for_topic(topic) or 1
                now += waited
            payload = len(header_bytes)
            if key is not None:
                payload += len(key)
            if value is not None:
                payload += len(value)
            if payload > self._payload_limit:
                raise self._too_large(estimate_size_in_bytes_upper_bound(payload, 0, 0))
            if partition is None:
                if self._partitioner is not None:
                    partition = int(self._partitioner(topic, key, value, cluster))
                elif key is not None and not self._ignore_keys:
                    partition = (murmur2(key) & 0x7FFFFFFF) % count
                else:
                    partition = UNKNOWN_PARTITION
            if txn is not None:
                if partition == UNKNOWN_PARTITION:  # sticky for the whole transaction
                    partition = txn.sticky.setdefault(topic, random.randrange(count))
                txn.maybe_add_partition(topic, partition)
            result = self._append(
                topic, partition, timestamp, key, value, header_bytes, callback,
                self._max_block_ms - waited, now, cluster,
            )  # fmt: skip
        except ApiException as exc:
            log.debug("Exception occurred during message send: %s", exc)
            if txn is not None:
                txn.record_failure(exc)
            return self._failed(topic, partition, exc, callback)
        if result.batch_is_full or result.new_batch_created:
            self._wakeup()
        return result.future

    def _serialize(self, topic: str, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
        if self._key_serializer is not None:
            key = self._key_serializer(topic, key)
        if self._value_serializer is not None:
            value = self._value_serializer(topic, value)
        return key, value

    def _too_large(self, size: int) -> RecordTooLargeException:
        if size > self._max_request_size:
            return RecordTooLargeException(
                f"The message is {size} bytes when serialized which is larger than "
                f"{self._max_request_size}, which is the value of the max.request.size "
                "configuration."
            )
        return RecordTooLargeException(
            f"The message is {size} bytes when serialized which is larger than the total "
            "memory buffer you have configured with the buffer.memory configuration."
        )

    @staticmethod
    def _failed(
        topic: str, partition: int | None, exc: Exception, callback: Callback | None
    ) -> FutureRecordMetadata:
        result = ProduceRequestResult(TopicPartition(topic, -1 if partition is None else partition))
        result.set(-1, -1, exc)
        if callback is not None:
            try:
                callback(None, exc)
            except Exception:
                log.exception("Error executing user-provided callback for topic %s", topic)
        result.done()
        return FutureRecordMetadata(result, 0, -1)

    def _wait_on_metadata(
        self, topic: str, partition: int | None, now_ms: int, max_wait_ms: int
    ) -> tuple[Cluster, int]:
        """Fetch metadata until the topic (and partition) is known or max.block.ms passes."""
        metadata = self._metadata
        cluster = metadata.cluster
        if topic in cluster.invalid_topics:
            raise InvalidTopicException(f"Invalid topics: [{topic}]")
        metadata.add(topic, now_ms)
        count = cluster.partition_count_for_topic(topic)
        if count is not None and (partition is None or partition < count):
            return cluster, 0
        deadline = now_ms + max_wait_ms
        while True:
            version = metadata.request_update_for_topic(topic)
            self._sender.wakeup()
            metadata.await_update(version, deadline)
            metadata.maybe_throw_fatal()  # a broker refused our credentials
            cluster = metadata.cluster
            now = self._clock.hi_res_clock_ms()
            error = metadata.topic_error(topic)
            if topic in cluster.invalid_topics or error is ErrorCode.invalid_topic_exception:
                raise InvalidTopicException(f"Invalid topics: [{topic}]")
            if topic in cluster.unauthorized_topics:
                raise TopicAuthorizationException(f"Not authorized to access topics: [{topic}]")
            count = cluster.partition_count_for_topic(topic)
            if count is not None and (partition is None or partition < count):
                return cluster, now - now_ms
            if self._closed:
                raise KafkaException("Producer closed while waiting for metadata")
            if now >= deadline:
                if count is None:
                    hint = ""
                    if error is ErrorCode.unknown_topic_or_partition:
                        hint = " (the broker reports it as unknown; is auto-creation off?)"
                    raise TimeoutException(
                        f"Topic {topic} not present in metadata after {max_wait_ms} ms.{hint}"
                    )
                raise TimeoutException(
                    f"Partition {partition} of topic {topic} with partition count {count} is "
                    f"not present in metadata after {max_wait_ms} ms."
                )

    # -- transactions ------------------------------------------------------------------

    def _transactions(self) -> ProducerTransactions:
        if self._txn is None:
            raise KafkaException("The producer has no transactional.id")
        return self._txn

    def init_transactions(self) -> None:
        """Get the producer id and epoch of ``transactional.id`` from its coordinator,
        fencing older producers with that id (their open transaction is aborted).

        :raises ProducerFencedException: a newer producer took over (fatal).
        :raises TimeoutException: not done within max.block.ms.
        """
        txn = self._transactions()
        pid, epoch = txn.init()
        assert self._transaction_manager is not None
        self._transaction_manager.set_producer_id_and_epoch(ProducerIdAndEpoch(pid, epoch))

    def begin_transaction(self) -> None:
        """Start a transaction: the records sent until commit or abort belong to it."""
        self._transactions().begin()
        assert self._transaction_manager is not None
        self._transaction_manager.failed_batch_error = None

    def _check_batches(self, txn: ProducerTransactions) -> None:
        """A batch of the transaction that failed makes it uncommittable."""
        tm = self._transaction_manager
        if tm is not None and tm.failed_batch_error is not None:
            error = tm.failed_batch_error
            txn.record_failure(
                error if isinstance(error, KafkaException) else KafkaException(str(error))
            )

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int], group_id: str, generation_id: int = -1,
        member_id: str = "", group_instance_id: str | None = None,
    ) -> None:  # fmt: skip
        """Commit the consumer group's ``offsets`` (the next offsets to read) as part of
        the transaction: visible to OffsetFetch only if the transaction commits."""
        self._transactions().send_offsets(
            offsets, group_id, generation_id, member_id, group_instance_id
        )

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTxnState:
        """Flush and stop the transaction taking records, without ending it: the first
        phase of a two-phase commit (KIP-939's name). The returned state lets this
        producer, or another process's (see :meth:`resume_transaction`), commit or
        abort it later; until then read_committed consumers of its partitions wait.

        :raises KafkaException: a record of the transaction failed (abort instead).
        """
        txn = self._transactions()
        txn.check_send()
        self.flush(timeout)
        self._check_batches(txn)
        return txn.prepare()

    def resume_transaction(self, prepared: PreparedTxnState) -> None:
        """Adopt a transaction another producer with the same ``transactional.id``
        prepared, so that :meth:`commit_transaction` or :meth:`abort_transaction` ends it
        (Flink's ``resumeTransaction``: EndTxn with the recorded producer id and epoch;
        Kafka's coordinator does not tie a transaction to a connection). Call it instead
        of :meth:`init_transactions`, which would abort the transaction. After the end,
        sending again needs :meth:`init_transactions`.

        :raises ProducerFencedException: on commit or abort, when a newer producer with
            the id was initialized or the transaction timed out (it was aborted then).
        """
        self._transactions().resume(prepared)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit: every record and offset of the transaction becomes visible
        to read_committed consumers, atomically.

        :raises KafkaException: a record of the transaction failed (abort instead).
        """
        txn = self._transactions()
        if txn.state != "PREPARED":
            txn.check_send()
            self.flush(timeout)
            self._check_batches(txn)
        txn.end(commit=True)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Flush what is queued, then abort: read_committed consumers never see the
        transaction's records, and its offsets are not committed. When a batch of the
        transaction failed (its sequence left a gap), the epoch is bumped after the
        abort (KIP-360) and every partition's sequence starts again, so the producer
        goes on with the next transaction."""
        txn = self._transactions()
        if txn.state != "PREPARED":
            txn.check_send()
            self.flush(timeout)
        tm = self._transaction_manager
        assert tm is not None
        bumped = txn.end(commit=False, bump_epoch=tm.failed_batch_error is not None)
        if bumped is not None:
            tm.start_new_epoch(ProducerIdAndEpoch(*bumped))

    # -- flush, close, metadata ----------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until each record completed.

        :raises TimeoutException: not done within ``timeout`` seconds.
        """
        self._accumulator.begin_flush()
        self._sender.wakeup()
        timeout_ms = None if timeout is None else int(timeout * 1000)
        if not self._accumulator.await_flush_completion(timeout_ms):
            raise TimeoutException(f"Flush did not complete within {timeout} s")

    def partitions_for(self, topic: str) -> list[PartitionInfo]:
        """The topic's partitions, fetching metadata if needed (up to max.block.ms)."""
        if self._closed:
            raise KafkaException("Cannot perform operation after producer has been closed")
        now = self._clock.hi_res_clock_ms()
        cluster, _ = self._wait_on_metadata(topic, None, now, self._max_block_ms)
        return list(cluster.partitions_for_topic(topic))

    def close(self, timeout: float | None = None) -> None:
        """Send what is queued and stop, waiting up to ``timeout`` seconds (None:
        until done); afterwards, or with ``timeout=0``, unsent records fail."""
        with self._close_lock:
            first = not self._closed
            self._closed = True
        if first:
            log.info("Closing the Kafka producer with timeout %s s.", timeout)
        if threading.current_thread() is self._io_thread:
            if timeout is None or timeout > 0:
                log.warning("Overriding close timeout %s s to 0 ms: close() called from the "
                            "producer's own callback", timeout)  # fmt: skip
            self._sender.force_close_now()
            return
        if timeout is not None and timeout <= 0:
            self._sender.force_close_now()
        else:
            self._sender.initiate_close()
            self._io_thread.join(timeout)
            if self._io_thread.is_alive():
                log.info("Proceeding to force close the producer since pending requests could "
                         "not be completed within timeout %s s.", timeout)  # fmt: skip
                self._sender.force_close_now()
        self._io_thread.join()
        self._metadata.close()
        if self._txn is not None:
            self._txn.client.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        if not getattr(self, "_closed", True):
            self._closed = True
            self._sender.force_close_now()

    # -- introspection ---------------------------------------------------------------------

    @property
    def metadata(self) -> Metadata:
        return self._metadata

    @property
    def accumulator(self) -> RecordAccumulator:
        return self._accumulator

    @property
    def transaction_manager(self) -> TransactionManager | None:
        return self._transaction_manager


def _as_bytes(data: Any, what: str) -> bytes:
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise SerializationException(
        f"The {what} must be bytes (or bytearray/memoryview), not {type(data).__name__}; "
        f"encode it first or set {what}.serializer"
    )
