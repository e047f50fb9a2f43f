"""A small blocking request/response client for the consumer and the admin client.

Each thread that talks to brokers (the application thread, the fetcher thread, the
heartbeat thread) owns a :class:`BlockingClient`, so a long-polling Fetch never holds
up a heartbeat. A client keeps one socket per broker, negotiates versions with
ApiVersions on connect (the highest version both this module and the broker know),
and refreshes metadata on demand. Requests are kio dataclasses built with
:func:`sluice.client.requests.build`; responses are decoded with
:func:`sluice.protocol.responses.decode_response`.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from sluice.protocol import ApiKey, FrameDecoder, encode_request
from sluice.protocol.apis import request_type
from sluice.protocol.responses import decode_response

from .errors import KafkaException, NetworkException, UnsupportedVersionException
from .requests import CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION, build

__all__ = ["CONSUMER_VERSIONS", "BlockingClient", "BrokerInfo", "TopicMetadata"]

CONSUMER_VERSIONS: Final[dict[int, int]] = {
    ApiKey.API_VERSIONS: 3,
    ApiKey.METADATA: 12,
    ApiKey.FETCH: 12,
    ApiKey.LIST_OFFSETS: 7,
    ApiKey.OFFSET_COMMIT: 8,
    ApiKey.OFFSET_FETCH: 7,
    ApiKey.FIND_COORDINATOR: 3,
    ApiKey.JOIN_GROUP: 7,
    ApiKey.SYNC_GROUP: 5,
    ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 4,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.LIST_GROUPS: 4,
    ApiKey.DELETE_GROUPS: 2,
    ApiKey.CREATE_TOPICS: 7,
    ApiKey.DELETE_TOPICS: 5,
    ApiKey.DELETE_RECORDS: 2,
    ApiKey.DESCRIBE_CONFIGS: 4,
    ApiKey.ALTER_CONFIGS: 2,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKey.CREATE_PARTITIONS: 3,
    ApiKey.DESCRIBE_CLUSTER: 1,
}
"""The highest version of each API this module's callers build requests for."""

_SIZE = struct.Struct(">i")


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class TopicMetadata:
    name: str
    error_code: int
    partitions: dict[int, int] = field(default_factory=dict)  # partition -> leader id
    is_internal: bool = False
    replicas: dict[int, tuple[int, ...]] = field(default_factory=dict)


class _Connection:
    def __init__(self, host: str, port: int, timeout_s: float, client_id: str) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.pending: list[memoryview] = []
        self.correlation_id = 0
        self.client_id = client_id
        self.lock = threading.Lock()
        self.versions: dict[int, tuple[int, int]] = {}

    def roundtrip(self, body: Any, timeout_s: float) -> Any:
        self.correlation_id += 1
        cid = self.correlation_id
        self.sock.settimeout(timeout_s)
        self.sock.sendall(encode_request(cid, body, self.client_id))
        while not self.pending:
            chunk = self.sock.recv(256 * 1024)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            self.pending.extend(self.decoder.feed(chunk))
        frame = self.pending.pop(0)
        response = decode_response(frame, body.__api_key__, body.__version__)
        if response.correlation_id != cid:
            raise ConnectionError(f"correlation id {response.correlation_id} != {cid}")
        return response.body

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class BlockingClient:
    """Blocking requests to the brokers of one cluster (thread-safe per connection)."""

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        client_id: str = "sluice-consumer",
        request_timeout_ms: int = 30_000,
    ) -> None:
        if isinstance(bootstrap_servers, str):
            bootstrap_servers = [s for s in bootstrap_servers.split(",") if s.strip()]
        self.bootstrap: list[tuple[str, int]] = []
        for server in bootstrap_servers:
            host, _, port = server.strip().rpartition(":")
            self.bootstrap.append((host or "localhost", int(port or 9092)))
        if not self.bootstrap:
            raise KafkaException("bootstrap.servers is empty")
        self.client_id = client_id
        self.timeout_s = request_timeout_ms / 1000
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self._conns: dict[Any, _Connection] = {}
        self._lock = threading.Lock()
        self._closed = False

    # -- connections ---------------------------------------------------------------

    def _connection(self, node: int | tuple[str, int]) -> _Connection:
        with self._lock:
            conn = self._conns.get(node)
            if conn is not None:
                return conn
            if self._closed:
                raise KafkaException("client closed")
        if isinstance(node, tuple):
            host, port = node
        else:
            info = self.brokers.get(node)
            if info is None:
                raise NetworkException(f"unknown broker {node}")
            host, port = info.host, info.port
        conn = _Connection(host, port, self.timeout_s, self.client_id)
        try:
            body = conn.roundtrip(
                build(
                    request_type(ApiKey.API_VERSIONS, 3),
                    client_software_name=CLIENT_SOFTWARE_NAME,
                    client_software_version=CLIENT_SOFTWARE_VERSION,
                ),
                self.timeout_s,
            )
            conn.versions = {
                int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys
            }
        except BaseException:
            conn.close()
            raise
        with self._lock:
            existing = self._conns.get(node)
            if existing is not None:  # another thread connected meanwhile: use theirs
                conn.close()
                return existing
            self._conns[node] = conn
        return conn

    def _drop(self, node: Any, conn: _Connection) -> None:
        with self._lock:
            if self._conns.get(node) is conn:
                del self._conns[node]
        conn.close()

    def send(
        self,
        node: int | tuple[str, int] | None,
        api_key: int,
        timeout_s: float | None = None,
        version: int | None = None,
        **fields: Any,
    ) -> Any:
        """Send one request to ``node`` (None: any broker) and return the response body.

        :raises NetworkException: the connection failed (it is dropped; retry).
        """
        if node is None:
            node = self.any_node()
        try:
            conn = self._connection(node)
        except OSError as exc:
            raise NetworkException(f"cannot connect to {node}: {exc}") from exc
        if version is None:
            ours = CONSUMER_VERSIONS[api_key]
            low, high = conn.versions.get(api_key, (0, -1))
            version = min(ours, high)
            if version < low:
                raise UnsupportedVersionException(f"broker does not support API {api_key}")
        body = build(request_type(api_key, version), **fields)
        with conn.lock:
            try:
                return conn.roundtrip(body, timeout_s or self.timeout_s)
            except (OSError, ConnectionError) as exc:
                self._drop(node, conn)
                raise NetworkException(f"request to {node} failed: {exc}") from exc

    def any_node(self) -> int | tuple[str, int]:
        with self._lock:
            for key in self._conns:
                if isinstance(key, int):
                    return key
        if self.brokers:
            return next(iter(self.brokers))
        return self.bootstrap[0]

    # -- metadata ------------------------------------------------------------------

    def refresh_metadata(self, topics: list[str] | None = None, auto_create: bool = False) -> Any:
        """Fetch metadata (``topics`` None: all) and merge it into :attr:`topics`."""
        last: Exception | None = None
        candidates: list[int | tuple[str, int]] = [*self.brokers, *self.bootstrap]
        for node in candidates:
            try:
                body = self.send(
                    node,
                    ApiKey.METADATA,
                    topics=None
                    if topics is None
                    else [{"name": t, "topic_id": None} for t in topics],
                    allow_auto_topic_creation=auto_create,
                )
            except NetworkException as exc:
                last = exc
                continue
            self._apply(body, topics is None)
            return body
        raise NetworkException(f"no broker answered Metadata: {last}")

    def _apply(self, body: Any, full: bool) -> None:
        self.brokers = {
            int(b.node_id): BrokerInfo(int(b.node_id), b.host, int(b.port), b.rack)
            for b in body.brokers
        }
        self.cluster_id = body.cluster_id
        self.controller_id = int(body.controller_id)
        if full:
            self.topics = {}
        for t in body.topics:
            meta = TopicMetadata(t.name, int(t.error_code), is_internal=bool(t.is_internal))
            for p in t.partitions:
                meta.partitions[int(p.partition_index)] = int(p.leader_id)
                meta.replicas[int(p.partition_index)] = tuple(int(r) for r in p.replica_nodes)
            if t.name is not None:
                self.topics[t.name] = meta

    def leader_for(self, topic: str, partition: int) -> int:
        meta = self.topics.get(topic)
        return -1 if meta is None else meta.partitions.get(partition, -1)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns = list(self._conns.values())
            self._conns.clear()
        for conn in conns:
            conn.close()
