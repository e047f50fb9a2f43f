"""A single-node broker answers ApiVersions, Metadata, Produce, Fetch, ... as soon as its
listeners open, and holds the coordinator APIs until the group and transaction
coordinators are built, answering them then in arrival order (a startup that fails drops
them). The coordinators are held back here by blocking the creation of
``__consumer_offsets``' logs on an event, so every step is deterministic: no sleeps, waits
are conditions under a deadline."""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader

from sluice.config import BrokerConfig
from sluice.protocol import ApiKey, ErrorCode, Request, encode_request
from sluice.protocol.apis import load_request_schema, response_header_version, response_type
from sluice.server.broker import Broker
from sluice.server.messages import build
from sluice.server.network import ClientIdentity, KafkaServer
from sluice.server.request_gate import RequestGate
from sluice.server.topic_admin import SingleNodeTopicAdmin
from support.waiting import wait_until_async

DEADLINE_S = 20.0
OFFSETS = "__consumer_offsets"
T = TypeVar("T")


async def within_deadline(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, DEADLINE_S)


def request(api_key: int, version: int, **values: Any) -> Any:
    return build(load_request_schema(api_key, version), **values)


def find_coordinator(group: str) -> Any:
    return request(ApiKey.FIND_COORDINATOR, 3, key=group, key_type=0)


def metadata(*topics: str, auto_create: bool = True) -> Any:
    return request(
        ApiKey.METADATA, 12,
        topics=[{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
        allow_auto_topic_creation=auto_create, include_topic_authorized_operations=False,
    )  # fmt: skip


class Client:
    """One connection: requests written as they are given, responses read in order."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._next_id = 0
        self._sent: list[tuple[int, Any]] = []

    @classmethod
    async def connect(cls, port: int) -> Client:
        return cls(*await within_deadline(asyncio.open_connection("127.0.0.1", port)))

    def send(self, body: Any) -> None:
        self._next_id += 1
        self._sent.append((self._next_id, body))
        self.writer.write(encode_request(self._next_id, body))

    async def receive(self) -> Any:
        """The answer to the oldest request not answered yet."""
        correlation_id, body = self._sent.pop(0)
        api_key, version = int(body.__api_key__), int(body.__version__)
        (size,) = struct.unpack(">i", await within_deadline(self.reader.readexactly(4)))
        payload = await within_deadline(self.reader.readexactly(size))
        header_cls: Any = (
            ResponseHeaderV1 if response_header_version(api_key, version) else ResponseHeaderV0
        )
        header, offset = entity_reader(header_cls)(payload, 0)
        assert header.correlation_id == correlation_id
        response, _ = entity_reader(response_type(api_key, version))(payload, offset)
        return response

    async def call(self, body: Any) -> Any:
        self.send(body)
        return await self.receive()

    def close(self) -> None:
        self.writer.close()


class HeldBack:
    """Blocks SingleNodeTopicAdmin.create_partition_logs (so the coordinators) until
    release()."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> None:
        self.entered = False
        self._release = asyncio.Event()
        original = SingleNodeTopicAdmin.create_partition_logs

        async def held(topic_admin: SingleNodeTopicAdmin, *args: Any) -> None:
            self.entered = True
            await self._release.wait()
            if fail:
                raise OSError("disk gone")
            await original(topic_admin, *args)

        monkeypatch.setattr(SingleNodeTopicAdmin, "create_partition_logs", held)

    def release(self) -> None:
        self._release.set()


async def start_broker(tmp_path: Path) -> tuple[Broker, asyncio.Future[None]]:
    """A broker starting in the background, once its listeners are open."""
    broker = Broker(BrokerConfig({
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path / "logs"),
    }))  # fmt: skip
    listening = asyncio.Event()
    started = asyncio.ensure_future(broker.start(on_listening=listening.set))
    await within_deadline(listening.wait())
    return broker, started


def test_non_coordinator_apis_are_answered_while_coordinator_apis_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        held_back = HeldBack(monkeypatch)
        broker, started = await start_broker(tmp_path)
        waiting = await Client.connect(broker.port)
        other = await Client.connect(broker.port)
        try:
            # FindCoordinator, then a Metadata behind it on the same connection.
            waiting.send(find_coordinator("g"))
            waiting.send(metadata(OFFSETS, auto_create=False))
            # coordinators being built
            await wait_until_async(
                lambda: held_back.entered, DEADLINE_S, "the coordinators being built"
            )

            versions = await other.call(request(ApiKey.API_VERSIONS, 3,
                client_software_name="t", client_software_version="1"))  # fmt: skip
            assert versions.error_code == ErrorCode.none
            assert {int(k.api_key) for k in versions.api_keys} >= {
                ApiKey.FIND_COORDINATOR, ApiKey.METADATA, ApiKey.INIT_PRODUCER_ID,
            }  # fmt: skip
            # Auto-creation must not make __consumer_offsets before the coordinator does.
            early = await other.call(metadata(OFFSETS))
            assert early.topics[0].error_code == ErrorCode.unknown_topic_or_partition
            created = await other.call(metadata("early-topic"))
            assert created.topics[0].error_code == ErrorCode.none
            assert not broker.coordinators.built and not started.done()

            held_back.release()
            coordinator = await waiting.receive()
            assert coordinator.error_code == ErrorCode.none
            assert (coordinator.node_id, coordinator.port) == (0, broker.port)
            # Served after the FindCoordinator, so after the coordinators were built.
            after = await waiting.receive()
            assert after.topics[0].error_code == ErrorCode.none
            assert len(after.topics[0].partitions) == 50
            await within_deadline(started)
            assert broker.coordinators.built
        finally:
            waiting.close()
            other.close()
            held_back.release()
            if not started.done():
                await asyncio.wait([started], timeout=DEADLINE_S)
            await broker.stop()

    asyncio.run(scenario())


def test_a_failed_startup_drops_the_held_coordinator_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        held_back = HeldBack(monkeypatch, fail=True)
        broker, started = await start_broker(tmp_path)
        waiting = await Client.connect(broker.port)
        try:
            answered = await waiting.call(metadata())
            assert answered.brokers[0].port == broker.port
            waiting.send(find_coordinator("g"))
            await wait_until_async(
                lambda: held_back.entered, DEADLINE_S, "the coordinators being built"
            )
            held_back.release()
            with pytest.raises(OSError, match="disk gone"):
                await within_deadline(started)
            with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
                await waiting.receive()
        finally:
            waiting.close()
            broker.log_manager.abandon()

    asyncio.run(scenario())


# -- RequestGate opened in steps, through a real listener ----------------------------------


def test_gate_opens_keys_in_steps_keeping_each_connections_order() -> None:
    async def scenario() -> list[str]:
        events: list[str] = []

        def answer(name: str) -> Callable[[Any, Request], Any]:
            def handle(_ctx: Any, request: Request) -> Any:
                events.append(f"{name} {request.header.correlation_id}")
                if request.api_key == ApiKey.FIND_COORDINATOR:
                    return build(request.response_type, throttle_time=0, error_code=0,
                                 error_message=None, node_id=0, host="h", port=1)  # fmt: skip
                return build(request.response_type, throttle_time=0, brokers=[],
                             cluster_id=None, controller_id=-1, topics=[])  # fmt: skip

            return handle

        gate = RequestGate([ApiKey.METADATA, ApiKey.FIND_COORDINATOR])
        server = KafkaServer(
            "127.0.0.1", 0, gate.handlers, _versions(gate), 1 << 20, 0, ClientIdentity()
        )
        await server.start()
        first = await Client.connect(server.port)
        second = await Client.connect(server.port)
        try:
            first.send(find_coordinator("g"))  # held until its key opens
            first.send(metadata())  # must not overtake it
            await wait_until_async(lambda: gate.held_count == 1, DEADLINE_S, "one request held")
            second.send(metadata())
            await wait_until_async(lambda: gate.held_count == 2, DEADLINE_S, "two requests held")
            gate.open({ApiKey.METADATA: answer("metadata")})
            assert gate.closed_keys == {ApiKey.FIND_COORDINATOR} and not gate.is_open
            await second.receive()  # answered while the other connection waits
            assert events == ["metadata 1"]
            with pytest.raises(ValueError):
                gate.open({ApiKey.METADATA: answer("again")})  # open already
            gate.open({ApiKey.FIND_COORDINATOR: answer("find_coordinator")})
            assert gate.is_open
            await first.receive()
            await first.receive()
        finally:
            first.close()
            second.close()
            await server.stop_accepting()
            await server.drain_and_close(5)
        return events

    assert asyncio.run(scenario()) == ["metadata 1", "find_coordinator 1", "metadata 2"]


def test_gate_close_refuses_the_keys_never_opened() -> None:
    async def scenario() -> None:
        gate = RequestGate([1, 2])
        gate.open({1: lambda _ctx, request: "served"})
        held = gate.handlers[2](None, _fake_request(2))
        gate.close()
        assert held.cancelled() and gate.is_open
        assert gate.handlers[1](None, _fake_request(1)) == "served"
        with pytest.raises(RuntimeError, match="failed to start"):
            gate.handlers[2](None, _fake_request(2))

    asyncio.run(scenario())


def _fake_request(api_key: int) -> Any:
    class Fake:
        pass

    fake = Fake()
    fake.api_key = api_key  # type: ignore[attr-defined]
    return fake


def _versions(gate: RequestGate) -> Any:
    from sluice.server.apis import registry

    return registry().versions.restrict(gate.handlers)
