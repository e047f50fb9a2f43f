"""Kafka's MockClient for the producer's tests: a stand-in NetworkClient that records
requests and completes them with the responses a test supplies, and a two-node cluster."""

from __future__ import annotations

from typing import Any

from sluice.client.net.cluster import Cluster, Node, PartitionInfo

NODE1 = Node(1, "127.0.0.1", 9092)
NODE2 = Node(2, "127.0.0.1", 9093)


def cluster(*partitions: tuple[str, int, Node | None]) -> Cluster:
    """A cluster of NODE1 and NODE2 with the given (topic, partition, leader)."""
    return Cluster("test", [NODE1, NODE2], [PartitionInfo(t, p, n) for t, p, n in partitions])


class MockClient:
    """A stand-in for NetworkClient (Kafka's MockClient): records requests and
    completes them with responses the test supplies."""

    def __init__(self, versions: dict[int, tuple[int, int]] | None = None) -> None:
        from sluice.protocol import ApiKey

        self.versions = versions or {
            ApiKey.PRODUCE: (3, 11),
            ApiKey.METADATA: (1, 12),
            ApiKey.INIT_PRODUCER_ID: (0, 5),
        }
        self.sent: list[tuple[Any, int, Any]] = []  # (ClientRequest, version, body)
        self.in_flight: list[Any] = []
        self.completed: list[Any] = []
        self.ready_nodes: set[int] | None = None
        self.correlation_id = 0

    def ready(self, node: Node, now_ms: int) -> bool:
        return self.ready_nodes is None or node.id in self.ready_nodes

    def poll_delay_ms(self, node: Node, now_ms: int) -> int:
        return 50

    def least_loaded_node(self, now_ms: int) -> Node:
        return NODE1

    def latest_usable_version(self, node_id: int, api_key: int) -> int:
        from sluice.client.errors import UnsupportedVersionException

        if api_key not in self.versions:
            raise UnsupportedVersionException(f"The broker does not support API {api_key}")
        return self.versions[api_key][1]

    def send(self, request: Any, now_ms: int) -> None:
        from sluice.client.net.client_request import ClientResponse, InFlightRequest

        version = request.version
        if version is None:
            version = self.latest_usable_version(request.destination, request.api_key)
        body = request.build(version)
        self.correlation_id += 1
        in_flight = InFlightRequest(
            request.destination, self.correlation_id, request.api_key, version,
            request.expect_response, now_ms, request.callback, request.decode,
        )  # fmt: skip
        self.sent.append((request, version, body))
        if request.expect_response:
            self.in_flight.append(in_flight)
        else:
            self.completed.append(ClientResponse(in_flight, now_ms, None))

    def respond(self, body: Any, *, disconnected: bool = False, timed_out: bool = False) -> None:
        """Answer the oldest in-flight request."""
        from sluice.client.net.client_request import ClientResponse

        request = self.in_flight.pop(0)
        self.completed.append(
            ClientResponse(request, 0, body, disconnected=disconnected, timed_out=timed_out)
        )

    def respond_produce(self, responses: dict[Any, Any]) -> None:
        from sluice.client.producer.produce_request import ProduceResponseData

        self.respond(ProduceResponseData(responses, 0))

    def poll(self, timeout_ms: int, now_ms: int) -> list[Any]:
        completed, self.completed = self.completed, []
        for response in completed:
            response.on_complete()
        return completed

    def has_in_flight_requests(self, node_id: int | None = None) -> bool:
        return bool(self.in_flight)

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        return len(self.in_flight)

    def wakeup(self) -> None:
        pass

    def close(self) -> None:
        while self.in_flight:
            self.respond(None, disconnected=True)
        self.poll(0, 0)

    def produce_batches(self, index: int = -1) -> dict[Any, bytes]:
        """The record batches of a sent Produce request, by topic-partition."""
        from kio.serial import entity_reader

        from sluice.base import TopicPartition
        from sluice.protocol import ApiKey
        from sluice.protocol.apis import request_type

        produce = [s for s in self.sent if s[0].api_key == ApiKey.PRODUCE]
        _, version, body = produce[index]
        raw = b"".join(bytes(segment) for segment in body)
        request, _ = entity_reader(request_type(ApiKey.PRODUCE, version))(raw, 0)
        return {
            TopicPartition(t.name, p.index): bytes(p.records)
            for t in request.topic_data
            for p in t.partition_data
        }
