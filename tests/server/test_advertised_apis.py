"""ApiVersions advertises exactly the APIs that have a handler: the versions table holds
no API without one, and a broker's answer on the wire names none."""

from __future__ import annotations

import socket
import struct

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.serial import entity_reader

import sluice
from sluice.protocol import DEFAULT_VERSIONS, ApiKey, ErrorCode, encode_request
from sluice.server.apis import HANDLER_MODULES, build_handlers


def test_every_api_in_the_versions_table_has_a_handler() -> None:
    assert set(DEFAULT_VERSIONS) == set(HANDLER_MODULES)
    handlers = build_handlers()
    assert all(callable(handlers[key]) for key in DEFAULT_VERSIONS)
    assert ApiKey.SASL_HANDSHAKE not in DEFAULT_VERSIONS  # no SASL listener yet
    assert ApiKey.SASL_AUTHENTICATE not in DEFAULT_VERSIONS


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


def test_a_broker_advertises_only_apis_it_handles() -> None:
    with sluice.EmbeddedBroker() as broker:
        request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            sock.sendall(encode_request(7, request))
            (size,) = struct.unpack(">i", _read_exactly(sock, 4))
            frame = _read_exactly(sock, size)
    assert frame[:4] == struct.pack(">i", 7)  # response header v0: the correlation id
    body, _ = entity_reader(ApiVersionsResponse)(frame, 4)
    assert body.error_code is ErrorCode.none
    advertised = {int(entry.api_key) for entry in body.api_keys}
    assert advertised == set(HANDLER_MODULES)
