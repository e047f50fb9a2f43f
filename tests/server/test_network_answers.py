"""Answers written when they are set: a parked answer (an :class:`Answer`) goes to the
socket inside ``set_result``, without waiting for its task to be woken; pipelined
Produce answers still go out in request order; an answer with a file region is left to
the task (``sendfile``), which reuses the segments already encoded."""

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

from sluice.protocol import ApiKey, Request, encode_request
from sluice.server import network
from sluice.server.answer import Answer
from sluice.server.apis import registry
from sluice.server.messages import build
from sluice.server.network import ClientIdentity, KafkaServer
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


@asynccontextmanager
async def serving(
    handlers: dict[int, Callable[[Any, Request], Any]],
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    versions = registry().versions.restrict(handlers)
    server = KafkaServer("127.0.0.1", 0, handlers, versions, 1 << 20, 0, ClientIdentity())
    await server.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        yield reader, writer
    finally:
        writer.close()
        await server.stop_accepting()
        await server.drain_and_close(5)


def test_a_parked_answer_is_written_inside_set_result() -> None:
    async def scenario() -> None:
        parked = Parked()
        async with serving({ApiKey.METADATA: parked.handler}) as (reader, writer):
            writer.write(encode_request(7, METADATA))
            await parked.wait_for(1)
            request, answer = parked.answers[0]
            answer.set_result(_metadata_response(request))
            assert answer.written  # before any turn of the loop
            assert await asyncio.wait_for(read_response(reader), 5) == 7
            # The task, woken afterwards, does not write it again: the next answer read
            # is the next request's.
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
        async with serving(handlers) as (reader, writer):
            for cid in (1, 2, 3):
                writer.write(encode_request(cid, produce_request(-1)))
            writer.write(encode_request(4, METADATA))  # waits for every produce answer
            await parked.wait_for(3)
            (r1, a1), (r2, a2), (r3, a3) = parked.answers
            a2.set_result(_produce_response(r2))
            assert not a2.written  # 1 is still ahead of it
            a1.set_result(_produce_response(r1))
            assert a1.written  # the oldest: written at once
            await asyncio.sleep(0)  # the flusher writes 2, then waits for 3
            a3.set_result(_produce_response(r3))
            order = [await asyncio.wait_for(read_response(reader), 5) for _ in range(4)]
            return order, [a1.written, a2.written, a3.written]

    order, written = asyncio.run(scenario())
    assert order == [1, 2, 3, 4]
    assert written[:2] == [True, False]


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
    plain = network.encode_response_segments

    def encode(correlation_id: int, response: Any) -> list[Any]:
        if response != "records":
            return plain(correlation_id, response)
        encoded.append(correlation_id)
        return [struct.pack(">ii", 4 + len(data), correlation_id), _Region(fd, 100, len(data))]

    monkeypatch.setattr(network, "encode_response_segments", encode)

    async def scenario() -> bytes:
        parked = Parked()
        async with serving({ApiKey.METADATA: parked.handler}) as (reader, writer):
            writer.write(encode_request(9, METADATA))
            await parked.wait_for(1)
            answer = parked.answers[0][1]
            answer.set_result("records")
            assert not answer.written and answer.encoded is not None
            (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))
            return await asyncio.wait_for(reader.readexactly(size), 5)

    try:
        body = asyncio.run(scenario())
    finally:
        os.close(fd)
    assert body == struct.pack(">i", 9) + data
    assert encoded == [9]  # the task sent the segments encoded when the answer was set
