"""The chaos run's clients, confluent-kafka (librdkafka) all: numbered idempotent
producers, a consumer that tails every partition during the run, and the final read of
every partition. Each records what it does into a :class:`History`. ``client_config``
adds librdkafka settings to each client (``security.protocol``, ``ssl.ca.location``,
``sasl.*``: a secured cluster).

confluent-kafka is imported when a client is made, so ``sluice.testing`` imports
without it; ``sluice chaos`` says to install it when it is missing.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from sluice.testing.chaos.history import History, Write, decode_value, encode_value

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message
    from confluent_kafka import Producer as KafkaProducer

__all__ = ["TailReader", "Writer", "read_all", "watermarks"]

_BAD_MSG = -199  # librdkafka's RD_KAFKA_RESP_ERR__BAD_MSG: a checksum or format error


class Writer:
    """Sends numbered values (:func:`encode_value`) to each partition in turn at
    ``rate_per_s``, from a thread, with an idempotent ``acks=all`` producer, recording
    each send, acknowledgement and failure. A producer that hits a fatal error (its
    idempotence broken) is replaced by a new one under the next writer id from
    ``writer_ids``."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        history: History,
        writer_ids: Iterator[int],
        *,
        rate_per_s: float,
        value_size: int = 100,
        delivery_timeout_ms: int = 20_000,
        client_config: Mapping[str, object] | None = None,
    ) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.client_config = dict(client_config or {})
        self.history = history
        self._ids = writer_ids
        self.interval = 1 / rate_per_s
        self.value_size = value_size
        self.delivery_timeout_ms = delivery_timeout_ms
        self.fatal_errors: list[str] = []
        self._fatal = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-writer", daemon=True)
        self._producer: KafkaProducer | None = None
        self._retired: list[KafkaProducer] = []

    def _new_producer(self) -> KafkaProducer:
        from confluent_kafka import Producer

        def on_error(err: KafkaError) -> None:
            if err.fatal():
                self.fatal_errors.append(str(err))
                self._fatal.set()

        return Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "request.timeout.ms": 5000,
                "delivery.timeout.ms": self.delivery_timeout_ms,
                "retry.backoff.ms": 100,
                "topic.metadata.refresh.interval.ms": 2000,
                "error_cb": on_error,
                "log_level": 0,
                **self.client_config,
            }
        )

    def _delivered(self, err: KafkaError | None, msg: Message[bytes, bytes]) -> None:
        value = msg.value()
        write = decode_value(value) if value is not None else None
        if write is None:
            return
        offset = msg.offset()
        if err is None and offset is not None:
            self.history.record_ack(write, offset)
        else:
            self.history.record_failure(write, str(err))

    def start(self) -> Writer:
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = self._producer = self._new_producer()
        writer = next(self._ids)
        seqs = [0] * self.partitions
        next_at = time.monotonic()
        for n in itertools.count():
            if self._stop.is_set():
                break
            if self._fatal.is_set():  # start over as a new writer
                self._retired.append(producer)
                producer.flush(1)
                self._fatal.clear()
                producer = self._producer = self._new_producer()
                writer, seqs = next(self._ids), [0] * self.partitions
            p = n % self.partitions
            write = Write(writer, p, seqs[p])
            value = encode_value(write, self.value_size)
            while not self._stop.is_set():
                try:
                    producer.produce(self.topic, value, partition=p, on_delivery=self._delivered)
                    break
                except BufferError:
                    producer.poll(0.05)
            else:
                break
            self.history.record_sent(write)
            seqs[p] += 1
            producer.poll(0)
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_at = time.monotonic()  # behind (a blocked produce): do not burst

    def stop(self, flush_timeout_s: float = 60) -> int:
        """Stop sending and wait for the outstanding deliveries; returns how many are
        still pending (they stay indeterminate)."""
        self._stop.set()
        self._thread.join(30)
        for retired in self._retired:
            retired.flush(1)
        if self._producer is None:
            return 0
        return int(self._producer.flush(flush_timeout_s))


def _consumer_config(
    bootstrap: str, group: str, client_config: Mapping[str, object] | None = None
) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "check.crcs": True,
        "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 2000,
        "log_level": 0,
        **(client_config or {}),
    }


class TailReader:
    """A consumer assigned every partition from its start, reading until stopped and
    recording every record it sees as a read during the run."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, history: History) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.history = history
        self.name = "tail"
        self.errors = 0
        self.records = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-reader", daemon=True)

    def start(self) -> TailReader:
        self._thread.start()
        return self

    def _run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer(_consumer_config(self.bootstrap, "chaos-tail"))
        try:
            consumer.assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)]
            )
            while not self._stop.is_set():
                for msg in consumer.consume(500, 0.2):
                    partition, offset, err = msg.partition(), msg.offset(), msg.error()
                    if err is not None:
                        self.errors += 1
                    if partition is None or offset is None or offset < 0:
                        continue
                    if err is not None:
                        if err.code() == _BAD_MSG:
                            self.history.record_read(self.name, partition, offset, None,
                                                     final=False)  # fmt: skip
                        continue
                    self.records += 1
                    self.history.record_read(
                        self.name, partition, offset, msg.value() or b"", final=False
                    )
        finally:
            consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def watermarks(
    bootstrap: str,
    topic: str,
    partition: int,
    timeout_s: float = 60,
    client_config: Mapping[str, object] | None = None,
) -> tuple[int, int]:
    """(low, high) watermarks of one partition, asked by a new client each try.

    A client kept across tries could wait in vain: librdkafka's query_watermark_offsets
    takes a partition that its cached metadata shows without a leader as a lasting error
    (at once "Local: Unknown partition", without asking again until metadata.max.age.ms,
    15 minutes), and just after an election a broker that the controller's UpdateMetadata
    has not reached yet still answers "no leader"."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    deadline = time.monotonic() + timeout_s
    while True:
        consumer = Consumer(_consumer_config(bootstrap, "chaos-final", client_config))
        try:
            found = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5)
            if found is not None:
                low, high = found
                return int(low), int(high)
        except KafkaException:
            pass
        finally:
            consumer.close()
        if time.monotonic() > deadline:
            raise TimeoutError(f"no watermarks for {topic}-{partition} in {timeout_s}s")
        time.sleep(0.5)


def read_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    history: History,
    stall_s: float = 30,
    client_config: Mapping[str, object] | None = None,
) -> None:
    """Read every partition from its start to its high watermark as the final read,
    into ``history``. A record that fails its checksum is recorded undecodable and
    skipped; a partition that makes no progress for ``stall_s`` is given up on, and
    ``history.final_read_complete`` says which partitions were read to the end."""
    from confluent_kafka import Consumer, TopicPartition

    ends = {p: watermarks(bootstrap, topic, p, client_config=client_config)
            for p in range(partitions)}  # fmt: skip
    positions = {p: low for p, (low, _) in ends.items()}
    consumer = Consumer(_consumer_config(bootstrap, "chaos-final", client_config))
    try:
        consumer.assign([TopicPartition(topic, p, low) for p, (low, _) in ends.items()])
        last_progress = time.monotonic()
        while any(positions[p] < ends[p][1] for p in positions):
            if time.monotonic() - last_progress > stall_s:
                break
            for msg in consumer.consume(1000, 0.5):
                partition, offset, err = msg.partition(), msg.offset(), msg.error()
                if partition is None or offset is None or offset < 0:
                    continue
                if err is not None:
                    if err.code() == _BAD_MSG and offset >= positions[partition]:
                        history.record_read("final", partition, offset, None, final=True)
                        positions[partition] = offset + 1
                        last_progress = time.monotonic()
                        consumer.seek(TopicPartition(topic, partition, offset + 1))
                    continue
                if offset < ends[partition][1]:
                    history.record_read("final", partition, offset, msg.value() or b"", final=True)
                positions[partition] = max(positions[partition], offset + 1)
                last_progress = time.monotonic()
    finally:
        consumer.close()
    for p in range(partitions):
        history.final_read_complete[p] = positions[p] >= ends[p][1]
