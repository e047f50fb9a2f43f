"""Requests, responses and the metadata updater of the :mod:`~.network_client`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ProtocolError
from sluice.protocol.responses import decode_response

from .errors import UnsupportedVersionException
from .requests import metadata_request

if TYPE_CHECKING:
    from .connection import InFlightRequest
    from .metadata import Metadata
    from .network_client import NetworkClient

__all__ = [
    "ClientRequest",
    "ClientResponse",
    "MetadataUpdater",
    "body_segments_with_header",
    "decode_api_versions",
]

log = logging.getLogger(__name__)


class ClientRequest:
    """A request to send to ``destination``: ``build(version)`` returns kio's request
    dataclass, or the already encoded body as a list of buffers (no header).
    ``version`` None means the highest version both sides support."""

    __slots__ = ("api_key", "build", "callback", "decode", "destination", "expect_response",
                 "version")  # fmt: skip

    def __init__(
        self,
        destination: int,
        api_key: int,
        build: Callable[[int], Any],
        callback: Callable[[ClientResponse], None] | None,
        *,
        version: int | None = None,
        expect_response: bool = True,
        decode: Callable[[memoryview, int], Any] | None = None,
    ) -> None:
        self.destination = destination
        self.api_key = api_key
        self.build = build
        self.callback = callback
        self.version = version
        self.expect_response = expect_response
        self.decode = decode


class ClientResponse:
    """The outcome of a request: a decoded body, or ``disconnected`` (and
    ``timed_out`` when request.timeout.ms expired). ``body`` is None for requests
    that expect no response."""

    __slots__ = ("body", "disconnected", "received_ms", "request", "timed_out")

    def __init__(
        self,
        request: InFlightRequest,
        received_ms: int,
        body: Any,
        *,
        disconnected: bool = False,
        timed_out: bool = False,
    ) -> None:
        self.request = request
        self.received_ms = received_ms
        self.body = body
        self.disconnected = disconnected
        self.timed_out = timed_out

    @property
    def destination(self) -> int:
        return self.request.destination

    @property
    def api_version(self) -> int:
        return self.request.api_version

    def on_complete(self) -> None:
        callback = self.request.callback
        if callback is not None:
            try:
                callback(self)
            except Exception:
                log.exception("Uncaught error in request completion for API key %d",
                              self.request.api_key)  # fmt: skip


class MetadataUpdater:
    """Sends Metadata requests when :class:`~.metadata.Metadata` says one is due
    (Kafka's ``DefaultMetadataUpdater``), to the least loaded node."""

    def __init__(self, client: NetworkClient, metadata: Metadata) -> None:
        self._client = client
        self._metadata = metadata
        self.in_flight = False

    def is_update_due(self, now_ms: int) -> bool:
        return not self.in_flight and self._metadata.time_to_next_update(now_ms) == 0

    def maybe_update(self, now_ms: int) -> int:
        """Send a Metadata request if due; return ms until it should be checked again."""
        client = self._client
        time_to_next = self._metadata.time_to_next_update(now_ms)
        wait_for_fetch = client.request_timeout_ms if self.in_flight else 0
        delay = max(time_to_next, wait_for_fetch)
        if delay > 0:
            return delay
        node = client.least_loaded_node(now_ms)
        if node is None:
            log.debug("Give up sending metadata request since no node is available")
            self._metadata.failed_update(now_ms)
            return 50
        if client.can_send_request(node.id):
            topics, partial = self._metadata.request_topics(now_ms)
            try:
                version = client.latest_usable_version(node.id, ApiKey.METADATA)
            except UnsupportedVersionException as exc:
                log.error("%s", exc)
                self._metadata.failed_update(now_ms)
                return client.request_timeout_ms
            allow = self._metadata.allow_auto_topic_creation

            def done(response: ClientResponse) -> None:
                self.in_flight = False
                if response.disconnected:
                    self._metadata.failed_update(response.received_ms)
                else:
                    self._metadata.update(response.body, topics, partial, response.received_ms)

            log.debug("Sending metadata request for %s to node %s", topics, node)
            self.in_flight = True
            client.send(
                ClientRequest(node.id, ApiKey.METADATA,
                              lambda v: metadata_request(v, topics, allow), done,
                              version=version),
                now_ms,
            )  # fmt: skip
            return client.request_timeout_ms
        if client.is_connecting(node.id) or client.is_connected(node.id):
            return 50
        client.maybe_connect(node, now_ms)
        delay = client.connection_delay(node, now_ms)
        return delay if 0 < delay < 2**62 else 50


def body_segments_with_header(
    body: list[Any], api_key: int, version: int, correlation_id: int, client_id: str | None
) -> list[Any]:
    """Frame a pre-encoded body (a list of buffers) with its size and request header."""
    from sluice.protocol import encode_request_header
    from sluice.protocol.frames import frame_segments

    header = encode_request_header(api_key, version, correlation_id, client_id)
    return frame_segments([header, *body])


def decode_api_versions(frame: memoryview, version: int) -> Any:
    """ApiVersions responses: an UNSUPPORTED_VERSION answer comes as v0 (KIP-511)."""
    try:
        return decode_response(frame, ApiKey.API_VERSIONS, version).body
    except ProtocolError:
        if version == 0:
            raise
        return decode_response(frame, ApiKey.API_VERSIONS, 0).body
