"""NetworkClient and ConsumerNetworkClient against a scripted fake broker: ApiVersions
fallback, timeouts, refusals, closing from another thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sluice.base.clock import SYSTEM_CLOCK
from sluice.client.errors import KafkaException, NetworkException
from sluice.client.net.client_request import ClientRequest, ClientResponse
from sluice.client.net.cluster import Node
from sluice.client.net.consumer_network_client import ConsumerNetworkClient
from sluice.client.net.metadata import Metadata
from sluice.client.net.network_client import ManualMetadataUpdater, NetworkClient
from sluice.client.net.requests import metadata_request
from sluice.protocol import (
    ApiKey,
    FrameDecoder,
    api_versions_fallback_response,
    api_versions_response,
    encode_response,
    parse_request_header,
)
from sluice.server.apis import registry

SERVED = registry().versions  # what a broker accepts and advertises


Reply = Callable[[int, int, int], bytes | None]  # (api_key, version, correlation) -> frame


class FakeBroker:
    """Accepts connections and answers each request with ``reply`` (None: silence)."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.requests: list[tuple[int, int]] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        decoder = FrameDecoder()
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                for frame in decoder.feed(data):
                    header, _ = parse_request_header(frame)
                    self.requests.append((header.api_key, header.api_version))
                    out = self.reply(header.api_key, header.api_version, header.correlation_id)
                    if out is not None:
                        conn.sendall(out)

    def close(self) -> None:
        self.server.close()


def api_versions_only(api_key: int, version: int, correlation_id: int) -> bytes | None:
    if api_key == ApiKey.API_VERSIONS:
        return encode_response(correlation_id, api_versions_response(SERVED, version))
    return None  # everything else: no answer


@pytest.fixture
def fake() -> Iterator[Callable[[Reply], FakeBroker]]:
    brokers: list[FakeBroker] = []

    def start(reply: Reply) -> FakeBroker:
        brokers.append(FakeBroker(reply))
        return brokers[-1]

    yield start
    for broker in brokers:
        broker.close()


def make_client(port: int, **kwargs: Any) -> tuple[NetworkClient, Node]:
    clock = SYSTEM_CLOCK
    metadata = Metadata(clock, metadata_expire_ms=10**9)
    node = Node(-1, "127.0.0.1", port)
    metadata.bootstrap([(node.host, node.port)])
    metadata.update_requested()
    client = NetworkClient(
        metadata, clock, client_id="test", metadata_updater=ManualMetadataUpdater(), **kwargs
    )
    return client, node


def poll_until(client: NetworkClient, condition: Callable[[], bool], timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        client.poll(50, SYSTEM_CLOCK.hi_res_clock_ms())


def test_connects_negotiates_versions_and_completes_requests(fake) -> None:  # type: ignore[no-untyped-def]
    def reply(api_key: int, version: int, correlation_id: int) -> bytes | None:
        if api_key == ApiKey.API_VERSIONS:
            return api_versions_only(api_key, version, correlation_id)
        from sluice.client.net.requests import build
        from sluice.protocol.apis import response_type

        body = build(response_type(api_key, version), brokers=[], topics=[], throttle_time=0)
        return encode_response(correlation_id, body)

    broker = fake(reply)
    client, node = make_client(broker.port)
    poll_until(client, lambda: client.ready(node, SYSTEM_CLOCK.hi_res_clock_ms()))
    assert client.latest_usable_version(node.id, ApiKey.METADATA) == 12
    responses: list[ClientResponse] = []
    client.send(
        ClientRequest(node.id, ApiKey.METADATA, lambda v: metadata_request(v, ["t"], True),
                      responses.append),
        SYSTEM_CLOCK.hi_res_clock_ms(),
    )  # fmt: skip
    poll_until(client, lambda: bool(responses))
    assert not responses[0].disconnected
    assert responses[0].body.topics == ()
    client.close()


def test_falls_back_when_the_broker_does_not_know_api_versions_v3(fake) -> None:  # type: ignore[no-untyped-def]
    def reply(api_key: int, version: int, correlation_id: int) -> bytes | None:
        if api_key == ApiKey.API_VERSIONS and version > 2:
            return encode_response(correlation_id, api_versions_fallback_response(SERVED))
        return api_versions_only(api_key, version, correlation_id)

    broker = fake(reply)
    client, node = make_client(broker.port)
    poll_until(client, lambda: client.ready(node, SYSTEM_CLOCK.hi_res_clock_ms()))
    assert broker.requests == [(ApiKey.API_VERSIONS, 3), (ApiKey.API_VERSIONS, 2)]
    client.close()


def test_an_unanswered_request_times_out_and_disconnects(fake) -> None:  # type: ignore[no-untyped-def]
    broker = fake(api_versions_only)
    client, node = make_client(broker.port, request_timeout_ms=300)
    poll_until(client, lambda: client.ready(node, SYSTEM_CLOCK.hi_res_clock_ms()))
    responses: list[ClientResponse] = []
    start = time.monotonic()
    client.send(
        ClientRequest(node.id, ApiKey.METADATA, lambda v: metadata_request(v, None, True),
                      responses.append),
        SYSTEM_CLOCK.hi_res_clock_ms(),
    )  # fmt: skip
    poll_until(client, lambda: bool(responses))
    assert responses[0].disconnected and responses[0].timed_out
    assert 0.25 < time.monotonic() - start < 5
    assert not client.is_connected(node.id)
    client.close()


def test_a_refused_connection_backs_off(fake) -> None:  # type: ignore[no-untyped-def]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here
    client, node = make_client(port, reconnect_backoff_ms=200, reconnect_backoff_max_ms=200)
    now = SYSTEM_CLOCK.hi_res_clock_ms()
    assert not client.ready(node, now)
    poll_until(client, lambda: not client.is_connecting(node.id))
    assert not client.is_connected(node.id)
    delay = client.connection_delay(node, SYSTEM_CLOCK.hi_res_clock_ms())
    assert 0 < delay <= 200
    assert not client.maybe_connect(node, SYSTEM_CLOCK.hi_res_clock_ms())  # still backing off
    client.close()


def test_silence_during_api_versions_hits_the_setup_timeout(fake) -> None:  # type: ignore[no-untyped-def]
    broker = fake(lambda api_key, version, correlation_id: None)
    client, node = make_client(broker.port, connection_setup_timeout_ms=200)
    client.ready(node, SYSTEM_CLOCK.hi_res_clock_ms())
    poll_until(client, lambda: bool(broker.requests))
    poll_until(client, lambda: not client.is_connecting(node.id))
    assert not client.is_connected(node.id)
    client.close()


def test_a_request_with_its_own_timeout_outlives_the_default(fake) -> None:  # type: ignore[no-untyped-def]
    broker = fake(api_versions_only)
    client, node = make_client(broker.port, request_timeout_ms=200)
    poll_until(client, lambda: client.ready(node, SYSTEM_CLOCK.hi_res_clock_ms()))
    responses: list[ClientResponse] = []
    start = time.monotonic()
    client.send(
        ClientRequest(node.id, ApiKey.METADATA, lambda v: metadata_request(v, None, True),
                      responses.append, timeout_ms=700),
        SYSTEM_CLOCK.hi_res_clock_ms(),
    )  # fmt: skip
    poll_until(client, lambda: bool(responses))
    assert responses[0].timed_out
    assert 0.65 < time.monotonic() - start < 5
    client.close()


# -- ConsumerNetworkClient: blocking requests over the NetworkClient --------------------


def test_the_consumer_network_client_negotiates_and_answers(fake) -> None:  # type: ignore[no-untyped-def]
    def reply(api_key: int, version: int, correlation_id: int) -> bytes | None:
        if api_key != ApiKey.METADATA:
            return api_versions_only(api_key, version, correlation_id)
        from sluice.client.net.requests import build
        from sluice.protocol.apis import response_type

        body = build(
            response_type(api_key, version), throttle_time=0, cluster_id="c", controller_id=7,
            brokers=[{"node_id": 7, "host": "127.0.0.1", "port": broker.port, "rack": None}],
            topics=[{"error_code": 0, "name": "t", "topic_id": None, "is_internal": False,
                     "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 7,
                                     "leader_epoch": 0, "replica_nodes": [7], "isr_nodes": [7],
                                     "offline_replicas": []}]},
                    {"error_code": 0, "name": "__consumer_offsets", "topic_id": None,
                     "is_internal": True, "partitions": []}],
        )  # fmt: skip
        return encode_response(correlation_id, body)

    broker = fake(reply)
    client = ConsumerNetworkClient(f"127.0.0.1:{broker.port}", "test", 5_000)
    body = client.refresh_metadata(["t"])
    assert [t.name for t in body.topics] == ["t", "__consumer_offsets"]
    assert client.cluster.internal_topics == {"__consumer_offsets"}
    assert client.leader_for("t", 0) == 7 and client.cluster.controller is not None
    assert broker.requests[:2] == [(ApiKey.API_VERSIONS, 3), (ApiKey.METADATA, 12)]
    client.forget_leaders("t")
    assert client.leader_for("t", 0) == -1
    client.refresh_metadata(["t"])
    assert client.leader_for("t", 0) == 7
    client.close()


def test_the_consumer_network_client_fails_fast_on_a_refused_connection() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here
    client = ConsumerNetworkClient(f"127.0.0.1:{port}", "test", 30_000)
    start = time.monotonic()
    with pytest.raises(NetworkException):
        client.send(None, ApiKey.METADATA, topics=[], allow_auto_topic_creation=False)
    with pytest.raises(NetworkException):
        client.send(Node(5, "127.0.0.1", port), ApiKey.METADATA, topics=[])
    with pytest.raises(NetworkException, match="unknown broker"):
        client.send(5, ApiKey.METADATA, topics=[])
    assert time.monotonic() - start < 5
    client.close()


def test_the_consumer_network_client_times_out_and_closes_from_another_thread(fake) -> None:  # type: ignore[no-untyped-def]
    broker = fake(api_versions_only)
    client = ConsumerNetworkClient(f"127.0.0.1:{broker.port}", "test", 30_000)
    with pytest.raises(NetworkException, match="timed out"):
        client.send(None, ApiKey.METADATA, timeout_s=0.3, topics=[])
    errors: list[BaseException] = []

    def blocked() -> None:
        try:
            client.send(None, ApiKey.METADATA, topics=[])
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=blocked)
    thread.start()
    deadline = time.monotonic() + 5
    while len(broker.requests) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)  # the second Metadata request is out
    client.close()
    thread.join(5)
    assert not thread.is_alive()
    assert len(errors) == 1 and type(errors[0]) is KafkaException
    assert "closed" in str(errors[0])
