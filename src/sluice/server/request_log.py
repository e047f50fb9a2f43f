"""The request log: one DEBUG line per request answered, on the logger ``sluice.request``.

Kafka's ``kafka.request.logger`` writes, at DEBUG, a line per completed request with its
header, connection, times and the client's identity. Sluice's is the same idea::

    Completed request:RequestHeader(apiKey=PRODUCE, apiVersion=9, clientId=rdkafka,
    correlationId=7) from connection 127.0.0.1:9092-127.0.0.1:53422;totalTime:0.412,
    requestBytes:1201,responseBytes:61,securityProtocol:PLAINTEXT,
    principal:User:ANONYMOUS,listener:PLAINTEXT,clientAddress:/127.0.0.1

``totalTime`` is in milliseconds, from the moment the broker starts handling the request
to the moment its answer is encoded and queued for the socket (a Fetch parked until data
arrives, an acks=all Produce waiting for the followers count their wait).
``requestBytes`` is the request's frame and ``responseBytes`` the answer's, without
their size prefixes; a request with no answer (acks=0) has ``responseBytes:0``. With
``--log-format json`` each of these is also a field of the line (``api_key``,
``api_version``, ``correlation_id``, ``client_id``, ``connection``,
``total_time_ms``, ``request_bytes``, ``response_bytes``, ``security_protocol``,
``principal``, ``listener``, ``client_address``).

When the logger is not enabled for DEBUG — the default — the network layer asks
:meth:`logging.Logger.isEnabledFor` once per request and does nothing else: no
:class:`RequestLogEntry` is made.
"""

from __future__ import annotations

import logging
import time
from typing import Final

from sluice.protocol.apis import ApiKey, InterBrokerApiKey
from sluice.protocol.codec import encode_response_segments
from sluice.protocol.fetch import segment_size
from sluice.protocol.server_connection import Response
from sluice.security import Session

__all__ = ["REQUEST_LOGGER", "RequestLogEntry", "api_name"]

REQUEST_LOGGER: Final = logging.getLogger("sluice.request")
"""Kafka's ``kafka.request.logger``: a line per request answered, at DEBUG."""

_SIZE_PREFIX: Final = 4


def api_name(api_key: int) -> str:
    """The API's name as Kafka's ``ApiKeys`` spells it: ``PRODUCE``, ``LEADER_AND_ISR``."""
    for enum in (ApiKey, InterBrokerApiKey):
        try:
            return enum(api_key).name
        except ValueError:
            continue
    return str(api_key)


class RequestLogEntry:
    """One request being handled, written to the request log when it is answered."""

    __slots__ = ("api_key", "api_version", "client_address", "client_id", "connection",
                 "correlation_id", "request_bytes", "session", "started_ns")  # fmt: skip

    def __init__(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None,
        request_bytes: int,
        connection: str,
        client_address: str,
        session: Session,
    ) -> None:
        """``connection``: Kafka's connection id, ``local-peer`` addresses;
        ``client_address``: as Kafka shows it, ``/127.0.0.1``."""
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.request_bytes = request_bytes
        self.connection = connection
        self.client_address = client_address
        self.session = session
        self.started_ns = time.perf_counter_ns()

    def answered(self, response: Response | None) -> None:
        """The answer is given (None: none). Writes the line; the answer's size is that of
        its encoding (encoded again here: this costs only while the log is at DEBUG)."""
        response_bytes = 0
        if response is not None:
            segments = encode_response_segments(self.correlation_id, response)
            response_bytes = sum(segment_size(s) for s in segments) - _SIZE_PREFIX
        self._log(response_bytes)

    def answered_framed(self, data: bytes) -> None:
        """The answer is given already framed (an inter-broker request's)."""
        self._log(len(data) - _SIZE_PREFIX)

    def _log(self, response_bytes: int) -> None:
        total_ms = (time.perf_counter_ns() - self.started_ns) / 1e6
        session = self.session
        name = api_name(self.api_key)
        principal = str(session.principal)
        REQUEST_LOGGER.debug(
            "Completed request:RequestHeader(apiKey=%s, apiVersion=%d, clientId=%s, "
            "correlationId=%d) from connection %s;totalTime:%.3f,requestBytes:%d,"
            "responseBytes:%d,securityProtocol:%s,principal:%s,listener:%s,clientAddress:%s",
            name, self.api_version, self.client_id, self.correlation_id, self.connection,
            total_ms, self.request_bytes, response_bytes, session.security_protocol,
            principal, session.listener_name, self.client_address,
            extra={
                "api_key": name, "api_version": self.api_version,
                "correlation_id": self.correlation_id, "client_id": self.client_id,
                "connection": self.connection, "total_time_ms": round(total_ms, 3),
                "request_bytes": self.request_bytes, "response_bytes": response_bytes,
                "security_protocol": session.security_protocol, "principal": principal,
                "listener": session.listener_name, "client_address": self.client_address,
            },
        )  # fmt: skip
