"""Sluice's Kafka clients: Producer (Kafka's ``KafkaProducer`` design), Consumer, Admin.

    from sluice.client import Consumer, Producer

    with Producer({"bootstrap.servers": "127.0.0.1:9092"}) as producer:
        producer.send("events", b"hello", key=b"k").get(timeout=10)
    with Consumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "g"}) as consumer:
        consumer.subscribe(["events"])
        records = consumer.poll(1.0)

The building blocks follow the Java client's classes and names and are usable on
their own: :class:`BufferPool`, :class:`ProducerBatch`, :class:`RecordAccumulator`,
:class:`Sender`, :class:`NetworkClient`, :class:`Metadata`, :class:`Cluster`.
See ``docs/producer.md``.
"""

from __future__ import annotations

from sluice.client.admin import (
    Admin,
    ClusterDescription,
    ConfigEntry,
    ConsumerGroupDescription,
    GroupListing,
    MemberDescription,
    NewTopic,
    PartitionDescription,
    TopicDescription,
)
from sluice.client.consumer.consumer import (
    Consumer,
    ConsumerRebalanceListener,
    ConsumerRecord,
    OffsetAndMetadata,
    TopicPartition,
)
from sluice.client.errors import (
    ApiException,
    BufferExhaustedException,
    ConfigException,
    KafkaException,
    RecordTooLargeException,
    RetriableException,
    SerializationException,
    TimeoutException,
    exception_for,
)
from sluice.client.net.client_request import ClientRequest, ClientResponse
from sluice.client.net.cluster import Cluster, Node, PartitionInfo
from sluice.client.net.metadata import Metadata
from sluice.client.net.network_client import NetworkClient
from sluice.client.producer.accumulator import (
    ReadyCheckResult,
    RecordAccumulator,
    RecordAppendResult,
)
from sluice.client.producer.buffer_pool import BufferPool
from sluice.client.producer.partitioner import murmur2
from sluice.client.producer.producer import Producer
from sluice.client.producer.producer_batch import (
    FutureRecordMetadata,
    ProducerBatch,
    RecordMetadata,
)
from sluice.client.producer.sender import Sender
from sluice.client.producer.transactions import PreparedTxnState
from sluice.protocol.records.compression import CompressionType

__all__ = [
    "Admin",
    "ApiException",
    "BufferExhaustedException",
    "BufferPool",
    "ClientRequest",
    "ClientResponse",
    "Cluster",
    "ClusterDescription",
    "CompressionType",
    "ConfigEntry",
    "ConfigException",
    "Consumer",
    "ConsumerGroupDescription",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "FutureRecordMetadata",
    "GroupListing",
    "KafkaException",
    "MemberDescription",
    "Metadata",
    "NetworkClient",
    "NewTopic",
    "Node",
    "OffsetAndMetadata",
    "PartitionDescription",
    "PartitionInfo",
    "PreparedTxnState",
    "Producer",
    "ProducerBatch",
    "ReadyCheckResult",
    "RecordAccumulator",
    "RecordAppendResult",
    "RecordMetadata",
    "RecordTooLargeException",
    "RetriableException",
    "Sender",
    "SerializationException",
    "TimeoutException",
    "TopicDescription",
    "TopicPartition",
    "exception_for",
    "murmur2",
]
