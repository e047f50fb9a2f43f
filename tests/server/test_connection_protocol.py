"""KafkaConnectionProtocol, the shell around a ServerConnection, on a fake transport: it
hands requests to handlers from the read callback, writes answers as they are released,
applies the back-pressure decisions, never handles a request inside another's call
stack, and closes on bad frames, handler errors and failed answers."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

from kio.schema.metadata.v12.request import MetadataRequest

from sluice.protocol import ApiKey, Request, encode_request
from sluice.protocol.memory_pool import MemoryPool
from sluice.server.answer import Answer
from sluice.server.apis import registry
from sluice.server.messages import build
from sluice.server.network import ClientIdentity, KafkaConnectionProtocol, KafkaServer
from support.wire import produce_request

VERSIONS = registry().versions  # what the broker serves

METADATA = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.closed = False
        self.reading_paused = False
        self.written = bytearray()

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.reading_paused = True

    def resume_reading(self) -> None:
        self.reading_paused = False

    def write(self, data: Any) -> None:
        self.written += data

    def writelines(self, data: Any) -> None:
        for segment in data:
            self.written += segment

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def correlation_ids(self) -> list[int]:
        ids, pos = [], 0
        while pos < len(self.written):
            size, cid = struct.unpack_from(">ii", self.written, pos)
            ids.append(cid)
            pos += 4 + size
        return ids


def metadata(_ctx: Any, request: Request) -> Any:
    return build(request.response_type, throttle_time=0, brokers=[], cluster_id=None,
                 controller_id=-1, topics=[])  # fmt: skip


def connected(
    handlers: dict[int, Callable[[Any, Request], Any]],
) -> tuple[KafkaConnectionProtocol[ClientIdentity], FakeTransport, KafkaServer[ClientIdentity]]:
    versions = VERSIONS.restrict(handlers)
    server = KafkaServer("127.0.0.1", 0, handlers, versions, 1 << 23, 0, ClientIdentity())
    protocol = KafkaConnectionProtocol(server)
    transport = FakeTransport()
    protocol.connection_made(transport)
    assert server.connection_count == 1 and protocol.host == "/127.0.0.1"
    return protocol, transport, server


def receive(protocol: KafkaConnectionProtocol[Any], data: bytes) -> None:
    """What the event loop does: recv_into the offered buffer, then report the count."""
    pos = 0
    while pos < len(data):
        buf = protocol.get_buffer(-1)
        take = min(len(buf), len(data) - pos)
        buf[:take] = data[pos : pos + take]
        del buf
        protocol.buffer_updated(take)
        pos += take


def test_requests_are_handled_in_the_read_callback_and_answered_at_once() -> None:
    async def scenario() -> None:
        protocol, transport, server = connected({ApiKey.METADATA: metadata})
        receive(protocol, encode_request(1, METADATA) + encode_request(2, METADATA))
        assert transport.correlation_ids() == [1, 2]
        assert protocol.conn.idle and server._idle.is_set()

    asyncio.run(scenario())


def test_an_answer_set_in_another_call_stack_is_written_there_and_the_next_request_waits() -> None:
    async def scenario() -> None:
        parked: list[tuple[Request, Answer]] = []

        def park(_ctx: Any, request: Request) -> Answer:
            answer = Answer(loop=asyncio.get_running_loop())
            parked.append((request, answer))
            return answer

        protocol, transport, server = connected({ApiKey.METADATA: park})
        receive(protocol, encode_request(1, METADATA) + encode_request(2, METADATA))
        assert len(parked) == 1 and not server._idle.is_set()
        request, answer = parked[0]
        answer.set_result(metadata(None, request))
        assert transport.correlation_ids() == [1]  # written inside set_result...
        assert len(parked) == 1  # ...but request 2 is not handled from in there
        await asyncio.sleep(0)
        assert len(parked) == 2
        parked[1][1].set_result(metadata(None, parked[1][0]))
        assert transport.correlation_ids() == [1, 2]
        assert server._idle.is_set()

    asyncio.run(scenario())


def test_pipelined_produce_answers_are_written_in_order_as_the_oldest_completes() -> None:
    async def scenario() -> None:
        parked: list[tuple[Request, Answer]] = []

        def park(_ctx: Any, request: Request) -> Answer:
            answer = Answer(loop=asyncio.get_running_loop())
            parked.append((request, answer))
            return answer

        def produced(request: Request) -> Any:
            return build(request.response_type, responses=[], throttle_time=0)

        protocol, transport, _ = connected({ApiKey.PRODUCE: park})
        receive(protocol, b"".join(encode_request(c, produce_request(-1)) for c in (1, 2, 3)))
        assert len(parked) == 3  # read and appended while the first waits
        for index in (2, 1):
            parked[index][1].set_result(produced(parked[index][0]))
        assert transport.written == b""
        parked[0][1].set_result(produced(parked[0][0]))
        assert transport.correlation_ids() == [1, 2, 3]

    asyncio.run(scenario())


def test_a_coroutine_answer_is_written_when_it_completes() -> None:
    async def scenario() -> None:
        release = asyncio.Event()

        async def slow(_ctx: Any, request: Request) -> Any:
            await release.wait()
            return metadata(None, request)

        protocol, transport, _ = connected({ApiKey.METADATA: slow})
        receive(protocol, encode_request(1, METADATA) + encode_request(2, METADATA))
        await asyncio.sleep(0)
        assert transport.written == b""
        release.set()
        for _ in range(10):
            await asyncio.sleep(0)
        assert transport.correlation_ids() == [1, 2]

    asyncio.run(scenario())


def test_a_bad_size_prefix_closes_the_connection() -> None:
    async def scenario() -> None:
        protocol, transport, _ = connected({ApiKey.METADATA: metadata})
        receive(protocol, struct.pack(">i", -5) + b"rest")
        assert transport.closed and protocol.conn.closed

    asyncio.run(scenario())


def test_a_handler_error_or_a_failed_answer_closes_the_connection() -> None:
    async def scenario() -> None:
        def fails(_ctx: Any, _request: Request) -> Any:
            raise RuntimeError("boom")

        protocol, transport, _ = connected({ApiKey.METADATA: fails})
        receive(protocol, encode_request(1, METADATA))
        assert transport.closed

        answers: list[Answer] = []

        def park(_ctx: Any, _request: Request) -> Answer:
            answers.append(Answer(loop=asyncio.get_running_loop()))
            return answers[-1]

        protocol, transport, server = connected({ApiKey.PRODUCE: park})
        receive(protocol, b"".join(encode_request(c, produce_request(-1)) for c in (1, 2)))
        answers[0].set_exception(RuntimeError("append failed"))
        assert transport.closed and transport.written == b""
        assert answers[1].cancelled()  # the rest are dropped
        assert server._idle.is_set()

    asyncio.run(scenario())


def test_reading_pauses_while_writing_is_paused_and_frames_pile_up() -> None:
    async def scenario() -> None:
        protocol, transport, _ = connected({ApiKey.METADATA: metadata})
        protocol.pause_writing()  # the client does not read its answers
        requests = encode_request(1, METADATA) * 1000
        while not transport.reading_paused:
            receive(protocol, requests)
        assert transport.written == b""
        protocol.resume_writing()
        assert not transport.reading_paused and protocol.conn.idle

    asyncio.run(scenario())


def test_connection_lost_cancels_the_answers_awaited_and_fails_drain() -> None:
    async def scenario() -> None:
        answers: list[Answer] = []

        def park(_ctx: Any, _request: Request) -> Answer:
            answers.append(Answer(loop=asyncio.get_running_loop()))
            return answers[-1]

        protocol, _, server = connected({ApiKey.METADATA: park})
        receive(protocol, encode_request(1, METADATA))
        protocol.pause_writing()
        drain = asyncio.ensure_future(protocol.drain())
        await asyncio.sleep(0)
        protocol.connection_lost(None)
        assert answers[0].cancelled()
        assert server.connection_count == 0 and server._idle.is_set()
        try:
            await drain
        except ConnectionResetError:
            return
        raise AssertionError("drain should fail once the connection is lost")

    asyncio.run(scenario())


Connected = tuple[KafkaConnectionProtocol[ClientIdentity], FakeTransport]


def with_server(server: KafkaServer[ClientIdentity]) -> Connected:
    protocol = KafkaConnectionProtocol(server)
    transport = FakeTransport()
    protocol.connection_made(transport)
    return protocol, transport


def test_housekeeping_trims_connections_that_received_nothing_since_the_last_round() -> None:
    async def scenario() -> None:
        protocol, _, server = connected({ApiKey.METADATA: metadata})
        receive(protocol, encode_request(1, METADATA))
        memory = protocol.conn._decoder.memory
        assert memory > 0
        server.housekeep(0.0)  # bytes came since the last round: kept
        assert protocol.conn._decoder.memory == memory
        server.housekeep(1.0)  # nothing since: the receive buffer goes
        assert protocol.conn._decoder.memory == 0
        receive(protocol, encode_request(3, METADATA))  # and comes back when bytes do
        assert protocol.conn._decoder.memory == memory

    asyncio.run(scenario())


def test_housekeeping_closes_a_connection_whose_request_is_too_slow_to_arrive() -> None:
    async def scenario() -> None:
        versions = VERSIONS.restrict({ApiKey.METADATA: metadata})
        server = KafkaServer(
            "127.0.0.1", 0, {ApiKey.METADATA: metadata}, versions, 1 << 23, 0,
            ClientIdentity(), read_timeout_ms=2_000,
        )  # fmt: skip
        slow, slow_transport = with_server(server)
        idle, idle_transport = with_server(server)
        receive(idle, encode_request(1, METADATA))
        receive(slow, encode_request(1, METADATA)[:7])
        server.housekeep(10.0)  # first seen partly received
        server.housekeep(11.9)
        assert not slow_transport.closed
        server.housekeep(12.0)
        assert slow_transport.closed and not idle_transport.closed

    asyncio.run(scenario())


def test_a_connection_paused_for_memory_reads_again_once_memory_is_released() -> None:
    async def scenario() -> None:
        pool = MemoryPool(1 << 20)
        versions = VERSIONS.restrict({ApiKey.METADATA: metadata})
        server = KafkaServer(
            "127.0.0.1", 0, {ApiKey.METADATA: metadata}, versions, 1 << 23, 0,
            ClientIdentity(), pool=pool,
        )  # fmt: skip
        protocol, transport = with_server(server)
        pool.allocate(1 << 20)  # spent elsewhere
        protocol.pause_writing()  # its answers wait: the requests it reads hold memory
        receive(protocol, encode_request(1, METADATA))
        assert transport.reading_paused and pool.waiting == 1
        protocol.resume_writing()
        assert transport.correlation_ids() == [1]  # handled, answered: it holds nothing
        assert not transport.reading_paused  # so it reads again, the pool still spent
        protocol.pause_writing()
        receive(protocol, encode_request(2, METADATA))
        assert transport.reading_paused
        pool.release(1 << 20)  # memory again: out of the line, reading
        assert not transport.reading_paused and pool.waiting == 0
        pool.allocate(2 << 20)
        receive(protocol, encode_request(3, METADATA))
        assert transport.reading_paused and pool.waiting == 1
        protocol.connection_lost(None)  # a closed connection leaves the line
        assert pool.waiting == 0 and pool.used == 2 << 20

    asyncio.run(scenario())


def test_a_connection_paused_for_its_backlog_waits_for_memory_if_the_pool_is_spent_then() -> None:
    async def scenario() -> None:
        answers: list[Answer] = []

        def park(_ctx: Any, _request: Request) -> Answer:
            answers.append(Answer(loop=asyncio.get_running_loop()))
            return answers[-1]

        pool = MemoryPool(64 << 20)
        handlers = {ApiKey.METADATA: metadata, ApiKey.PRODUCE: park}
        server = KafkaServer(
            "127.0.0.1", 0, handlers, VERSIONS.restrict(handlers), 1 << 23, 0,
            ClientIdentity(), pool=pool,
        )  # fmt: skip
        protocol, transport = with_server(server)
        protocol.pause_writing()  # the client does not read its answers
        requests = encode_request(1, METADATA) * 1000
        while not transport.reading_paused:
            receive(protocol, requests)
        receive(protocol, encode_request(2, produce_request(-1)))  # last, a Produce to wait
        assert pool.waiting == 0  # paused for its backlog, not for memory
        pool.allocate(64 << 20)  # meanwhile others spend the pool
        protocol.resume_writing()  # the backlog is handled; the Produce waits, holding
        assert len(answers) == 1 and transport.reading_paused and pool.waiting == 1
        answers[0].set_result(None)  # answered: it holds nothing, and reads again
        assert not transport.reading_paused

    asyncio.run(scenario())
