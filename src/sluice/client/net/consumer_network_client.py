"""``ConsumerNetworkClient``: blocking requests over the :class:`~.network_client.NetworkClient`.

Kafka's ``ConsumerNetworkClient``: the consumer, the admin client and the
transaction client send a request and poll the one network client until it
completes, so framing, correlation ids, ApiVersions negotiation, request timeouts,
reconnect backoff and the cluster metadata live in one place, shared with the
producer. Requests are kio dataclasses built from keyword fields with
:func:`sluice.client.net.requests.build` at the highest version both sides support.

A network client belongs to one thread, so each thread that talks to brokers owns
a ``ConsumerNetworkClient``: the consumer's application thread, its fetcher thread
and its heartbeat thread each have their own, and a long-polling Fetch never holds
up a heartbeat. A lock lets a second thread (the consumer's commit thread) take
turns on one client; :meth:`close` may be called from any thread and fails a
request in progress with "client closed".

Metadata is refreshed only when asked (:meth:`refresh_metadata`; the network client
runs with a :class:`~.network_client.ManualMetadataUpdater`), into a
:class:`~.metadata.Metadata` whose :class:`~.cluster.Cluster` answers which node
leads a partition. Group and transaction coordinators get a node id of their own
(Kafka's ``Integer.MAX_VALUE - id``), hence a connection of their own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from sluice.base import TopicPartition
from sluice.base.clock import SYSTEM_CLOCK
from sluice.client.errors import KafkaException, NetworkException
from sluice.client.net.client_request import ClientRequest, ClientResponse
from sluice.client.net.cluster import Cluster, Node
from sluice.client.net.metadata import Metadata
from sluice.client.net.network_client import ManualMetadataUpdater, NetworkClient
from sluice.client.net.requests import build
from sluice.client.security import ClientSecurity
from sluice.protocol import ApiKey
from sluice.protocol.apis import request_type

__all__ = ["ConsumerNetworkClient", "coordinator_node"]

_MAX_NODE_ID = 2**31 - 1


def coordinator_node(body: Any) -> Node:
    """The node to reach the coordinator named by a FindCoordinator (v0-3) response."""
    return Node(_MAX_NODE_ID - int(body.node_id), str(body.host), int(body.port))


def coordinator_broker_id(node: Node) -> int:
    """The broker id of a node made by :func:`coordinator_node`."""
    return _MAX_NODE_ID - node.id


def _bootstrap_addresses(servers: Iterable[str]) -> list[tuple[str, int]]:
    out = []
    for server in servers:
        if server.strip():
            host, _, port = server.strip().rpartition(":")
            out.append((host or "localhost", int(port or 9092)))
    if not out:
        raise KafkaException("bootstrap.servers is empty")
    return out


class ConsumerNetworkClient:
    """Blocking requests to the brokers of one cluster, for one thread at a time."""

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        client_id: str = "sluice-consumer",
        request_timeout_ms: int = 30_000,
        security: ClientSecurity | None = None,
    ) -> None:
        """``security``: the connections' (PLAINTEXT by default)."""
        self.security = security if security is not None else ClientSecurity()
        if isinstance(bootstrap_servers, str):
            bootstrap_servers = bootstrap_servers.split(",")
        addresses = _bootstrap_addresses(bootstrap_servers)
        self.bootstrap_servers = ",".join(f"{host}:{port}" for host, port in addresses)
        self.client_id = client_id
        self.timeout_s = request_timeout_ms / 1000
        self._clock = SYSTEM_CLOCK
        self.metadata = Metadata(self._clock, allow_auto_topic_creation=False)
        self.metadata.bootstrap(addresses)
        self._client = NetworkClient(
            self.metadata,
            self._clock,
            client_id,
            request_timeout_ms=request_timeout_ms,
            send_buffer_bytes=-1,  # the system's (auto-tuned) socket buffers
            receive_buffer_bytes=-1,
            metadata_updater=ManualMetadataUpdater(),
            ssl_context=self.security.ssl_context,
            sasl=self.security.sasl,
        )
        self._lock = threading.RLock()
        self._closed = False
        self._network_closed = False
        self._stale_topics: set[str] = set()

    @property
    def cluster(self) -> Cluster:
        """The cluster as of the last :meth:`refresh_metadata`."""
        return self.metadata.cluster

    # -- requests ------------------------------------------------------------------

    def send(
        self,
        node: Node | int | None,
        api_key: int,
        timeout_s: float | None = None,
        version: int | None = None,
        **fields: Any,
    ) -> Any:
        """Send one request to ``node`` (None: the least loaded broker) and return the
        response body; ``timeout_s`` None means ``request.timeout.ms``.

        :raises NetworkException: no connection, or it broke or timed out (retry).
        :raises UnsupportedVersionException: no version of the API both sides support.
        :raises KafkaException: the client was closed.
        """
        timeout_ms = int((timeout_s or self.timeout_s) * 1000)
        with self._lock:
            if node is None:
                return self._send_to_any(api_key, timeout_ms, version, fields, False)
            target = self._node(node)
            self._await_ready(target)
            return self._await_response(target, api_key, timeout_ms, version, fields)

    def _node(self, node: Node | int) -> Node:
        if isinstance(node, Node):
            return node
        found = self.metadata.cluster.nodes.get(node) if node >= 0 else None
        if found is None:
            raise NetworkException(f"unknown broker {node}")
        return found

    def _send_to_any(
        self, api_key: int, timeout_ms: int, version: int | None, fields: dict[str, Any],
        retry_failed_requests: bool,
    ) -> Any:  # fmt: skip
        """To the least loaded node; another one while connections (and, when
        ``retry_failed_requests``, requests) fail, each node at most once."""
        client = self._client
        tried: set[int] = set()
        last: NetworkException | None = None
        while True:
            now_ms = self._clock.hi_res_clock_ms()
            target = client.least_loaded_node(now_ms)
            if target is None or target.id in tried:  # all backing off, or tried already
                untried = [n for n in self.metadata.cluster.nodes.values() if n.id not in tried]
                if not untried:
                    raise NetworkException(f"no broker is reachable: {last}")
                target = min(untried, key=lambda n: client.connection_delay(n, now_ms))
            tried.add(target.id)
            try:
                self._await_ready(target)
            except NetworkException as exc:
                last = exc
                continue
            try:
                return self._await_response(target, api_key, timeout_ms, version, fields)
            except NetworkException as exc:
                if not retry_failed_requests:
                    raise
                last = exc

    def _await_ready(self, node: Node) -> None:
        """Connect to ``node`` (ApiVersions included), after its reconnect backoff if
        it failed before; one attempt, so a refusal fails at once."""
        client = self._client
        attempted = False
        while True:
            self._check_open()
            now_ms = self._clock.hi_res_clock_ms()
            if client.can_send_request(node.id):
                return
            self.metadata.maybe_throw_fatal()  # the broker refused our credentials
            if client.is_connecting(node.id) or client.is_connected(node.id):
                attempted = True
                client.poll(client.request_timeout_ms, now_ms)
            elif attempted:
                raise NetworkException(f"cannot connect to {node.host}:{node.port}")
            elif (delay := client.connection_delay(node, now_ms)) > 0:
                client.poll(delay, now_ms)  # wait out the reconnect backoff
            else:
                client.maybe_connect(node, now_ms)
                attempted = True

    def _await_response(
        self, node: Node, api_key: int, timeout_ms: int, version: int | None,
        fields: dict[str, Any],
    ) -> Any:  # fmt: skip
        outcome: list[ClientResponse] = []
        request = ClientRequest(
            node.id, api_key, lambda v: build(request_type(api_key, v), **fields),
            outcome.append, version=version, timeout_ms=timeout_ms,
        )  # fmt: skip
        self._client.send(request, self._clock.hi_res_clock_ms())
        while not outcome:
            self._check_open()
            self._client.poll(timeout_ms, self._clock.hi_res_clock_ms())
        response = outcome[0]
        if response.disconnected:
            why = "timed out" if response.timed_out else "the connection was lost"
            raise NetworkException(f"request to {node.host}:{node.port} failed: {why}")
        return response.body

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaException("client closed")

    # -- metadata ------------------------------------------------------------------

    def refresh_metadata(self, topics: list[str] | None = None, auto_create: bool = False) -> Any:
        """Fetch metadata for ``topics`` (None: all topics, replacing what is known)
        and return the response body.

        :raises NetworkException: no broker answered.
        """
        fields = {
            "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": auto_create,
        }
        with self._lock:
            timeout_ms = int(self.timeout_s * 1000)
            body = self._send_to_any(ApiKey.METADATA, timeout_ms, None, fields, True)
            self.metadata.update(body, topics, topics is not None, self._clock.hi_res_clock_ms())
            if topics is None:
                self._stale_topics.clear()
            else:
                self._stale_topics.difference_update(topics)
        return body

    def leader_for(self, topic: str, partition: int) -> int:
        """The id of the partition's leader, -1 when unknown."""
        if topic in self._stale_topics:
            return -1
        leader = self.metadata.cluster.leader_for(TopicPartition(topic, partition))
        return -1 if leader is None else leader.id

    def forget_leaders(self, topic: str) -> None:
        """Treat ``topic``'s leaders as unknown until its next refresh (a broker said
        it no longer leads)."""
        self._stale_topics.add(topic)

    def close(self) -> None:
        """Close every connection; a request in progress on another thread fails."""
        self._closed = True
        self._client.wakeup()
        with self._lock:
            if not self._network_closed:
                self._network_closed = True
                self._client.close()
                self.metadata.close()
