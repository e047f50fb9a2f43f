"""Answers written when they are set: a parked answer (an :class:`Answer`) goes to the
socket inside ``set_result``, without a turn of the event loop; pipelined Produce
answers still go out in request order, each completed one released with the oldest; an
answer with a file region is sent by a task (``sendfile``), with the segments encoded
when it was set."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from kio.schema.metadata.v12.request import MetadataRequest

from sluice.protocol import ApiKey, Request, encode_request, server_connection
from sluice.server.answer import Answer
from sluice.server.apis import registry
from sluice.server.messages import build
from sluice.server.network import ClientIdentity, KafkaConnectionProtocol, KafkaServer
from support.wire import produce_request
from support.wire import read_correlation_id as read_response

METADATA = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def _metadata_response(request: Request) -> Any:
    return build(request.response_type, throttle_time=0, brokers=[], cluster_id=None,
                 controller_id=-1, topics=[])  # fmt: skip


def _produce_response(request: Request) -> Any:
    return build(request.response_type, responses=[], throttle_time=0)


class Parked:
    """Handlers that park every answer in ``answers`` (request, Answer), in arrival order."""

    def __init__(self) -> None:
        self.answers: list[tuple[Request, Answer]] = []

    def handler(self, _ctx: Any, request: Request) -> Answer:
        answer = Answer(loop=asyncio.get_running_loop())
        self.answers.append((request, answer))
        return answer

    async def wait_for(self, count: int) -> None:
        async def arrived() -> None:
            while len(self.answers) < count:
                await asyncio.sleep(0.001)

        await asyncio.wait_for(arrived(), 5)


Serving = tuple[asyncio.StreamReader, asyncio.StreamWriter, KafkaServer[ClientIdentity]]


@asynccontextmanager
async def serving(handlers: dict[int, Callable[[Any, Request], Any]]) -> AsyncIterator[Serving]:
    server = KafkaServer(
        "127.0.0.1",
        0,
        handlers,
        registry().versions.restrict(handlers),
        1 << 20,
        0,
        ClientIdentity(),
    )
    await server.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        yield reader, writer, server
    finally:
        writer.close()
        await server.stop_accepting()
        await server.drain_and_close(5)


def the_connection(server: KafkaServer[ClientIdentity]) -> KafkaConnectionProtocol[ClientIdentity]:
    (connection,) = server._connections
    return connection


def test_a_parked_answer_is_written_inside_set_result() -> None:
    async def scenario() -> None:
        parked = Parked()
        async with serving({ApiKey.METADATA: parked.handler}) as (reader, writer, server):
            writer.write(encode_request(7, METADATA))
            await parked.wait_for(1)
            request, answer = parked.answers[0]
            connection = the_connection(server)
            assert connection.conn.in_flight == 1
            answer.set_result(_metadata_response(request))
            assert connection.conn.idle  # written before any turn of the loop
            assert await asyncio.wait_for(read_response(reader), 5) == 7
            # Nothing writes it again: the next answer read is the next request's.
            writer.write(encode_request(8, METADATA))
            await parked.wait_for(2)
            request, answer = parked.answers[1]
            answer.set_result(_metadata_response(request))
            assert await asyncio.wait_for(read_response(reader), 5) == 8

    asyncio.run(scenario())


def test_pipelined_produce_answers_set_out_of_order_go_out_in_order() -> None:
    async def scenario() -> tuple[list[int], list[bool]]:
        parked = Parked()
        handlers = {
            ApiKey.PRODUCE: parked.handler,
            ApiKey.METADATA: lambda _ctx, request: _metadata_response(request),
        }
        async with serving(handlers) as (reader, writer, server):
            for cid in (1, 2, 3):
                writer.write(encode_request(cid, produce_request(-1)))
            writer.write(encode_request(4, METADATA))  # waits for every produce answer
            await parked.wait_for(3)
            conn = the_connection(server).conn
            (r1, a1), (r2, a2), (r3, a3) = parked.answers
            owed = [conn.in_flight]
            a2.set_result(_produce_response(r2))
            owed.append(conn.in_flight)  # 1 is still ahead of it
            a1.set_result(_produce_response(r1))
            owed.append(conn.in_flight)  # the oldest: written at once, and 2 with it
            a3.set_result(_produce_response(r3))
            owed.append(conn.in_flight)
            order = [await asyncio.wait_for(read_response(reader), 5) for _ in range(4)]
            return order, owed

    order, owed = asyncio.run(scenario())
    assert order == [1, 2, 3, 4]
    assert owed == [3, 3, 1, 0]


class _Region:
    """A file region as the log's FileSlice presents it to the network layer."""

    def __init__(self, fd: int, position: int, size: int) -> None:
        self._fd = fd
        self.position = position
        self.size = size

    def fileno(self) -> int:
        return self._fd

    def read(self) -> bytes:
        return os.pread(self._fd, self.size, self.position)


def test_an_answer_with_a_file_region_is_sent_by_its_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = os.urandom(10_000)
    path = tmp_path / "segment"
    path.write_bytes(b"\xff" * 100 + data)
    fd = os.open(path, os.O_RDONLY)
    encoded: list[int] = []
    plain = server_connection.encode_response_segments

    def encode(correlation_id: int, response: Any) -> list[Any]:
        if response != "records":
            return plain(correlation_id, response)
        encoded.append(correlation_id)
        return [struct.pack(">ii", 4 + len(data), correlation_id), _Region(fd, 100, len(data))]

    monkeypatch.setattr(server_connection, "encode_response_segments", encode)

    async def scenario() -> bytes:
        parked = Parked()
        async with serving({ApiKey.METADATA: parked.handler}) as (reader, writer, server):
            writer.write(encode_request(9, METADATA))
            await parked.wait_for(1)
            answer = parked.answers[0][1]
            answer.set_result("records")
            assert the_connection(server).conn.sending  # handed to the task
            (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))
            return await asyncio.wait_for(reader.readexactly(size), 5)

    try:
        body = asyncio.run(scenario())
    finally:
        os.close(fd)
    assert body == struct.pack(">i", 9) + data
    assert encoded == [9]  # encoded once, when the answer was set
