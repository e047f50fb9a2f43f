"""A broker's ApiVersions answer on the wire is the one built from its API modules' specs:
it advertises exactly the APIs that have a module (tests/server/test_apis.py checks the
specs themselves)."""

from __future__ import annotations

import socket
import struct

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.serial import entity_reader

import sluice
from sluice.protocol import ErrorCode, api_versions_response, encode_request, encode_response
from sluice.server.apis import registry


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
    assert advertised == set(registry().handlers())
    expected = encode_response(7, api_versions_response(registry().versions, 3))
    assert frame == expected[4:]
