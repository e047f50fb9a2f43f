"""Speaking raw Kafka frames to a broker: :class:`RawClient` (a blocking socket, for
well- and ill-formed requests) and helpers for asyncio streams to a ``KafkaServer``."""

from __future__ import annotations

import asyncio
import datetime
import socket
import struct

from kio.schema.produce.v9.request import ProduceRequest


def produce_request(acks: int) -> ProduceRequest:
    """An empty Produce v9 request with ``acks``."""
    return ProduceRequest(
        transactional_id=None, acks=acks,
        timeout=datetime.timedelta(milliseconds=1000), topic_data=(),
    )  # fmt: skip


async def read_correlation_id(reader: asyncio.StreamReader) -> int:
    """Read one response frame; its correlation id."""
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    body = await reader.readexactly(size)
    return int(struct.unpack_from(">i", body, 0)[0])


class RawClient:
    """A bare Kafka protocol connection for sending well- and ill-formed requests."""

    def __init__(self, bootstrap: str, timeout_s: float = 10) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes | None:
        """One response frame, or None when the broker closed the connection."""
        size = self._read_exact(4)
        if size is None:
            return None
        return self._read_exact(int.from_bytes(size, "big", signed=True))

    def _read_exact(self, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def is_closed_by_broker(self) -> bool:
        return self.read_frame() is None

    def request(self, body: object) -> object:
        """Send a kio request dataclass and decode the response of the same version."""
        from kio.serial import entity_reader

        from sluice.protocol import encode_request
        from sluice.protocol.apis import response_header_version, response_type
        from sluice.protocol.headers import skip_tagged_fields

        self.correlation_id += 1
        self.send_raw(encode_request(self.correlation_id, body))  # type: ignore[arg-type]
        frame = self.read_frame()
        assert frame is not None, "the broker closed the connection"
        assert int.from_bytes(frame[:4], "big") == self.correlation_id
        api_key, version = int(body.__api_key__), int(body.__version__)  # type: ignore[attr-defined]
        offset = 4
        if response_header_version(api_key, version) >= 1:
            offset = skip_tagged_fields(frame, offset, len(frame))
        value, _ = entity_reader(response_type(api_key, version))(frame, offset)
        return value
