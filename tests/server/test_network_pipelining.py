"""The network layer pipelines Produce: a request waiting for its acknowledgement does
not stop the next one on the same connection from being read and appended, answers
still go out in request order, and other APIs wait for every earlier answer."""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.metadata.v12.request import MetadataRequest

from sluice.protocol import ApiKey, Request, encode_request
from sluice.server.apis import registry
from sluice.server.messages import build
from sluice.server.network import ClientIdentity, KafkaServer
from support.wire import produce_request as _produce
from support.wire import read_correlation_id as _read_response


async def _scenario() -> tuple[list[str], list[int]]:
    events: list[str] = []
    waiting: list[asyncio.Future[Any]] = []

    def produce(_ctx: Any, request: Request) -> Any:
        body: Any = request.body
        cid = request.header.correlation_id
        events.append(f"produce {cid} appended")
        response = build(request.response_type, responses=[], throttle_time=0)
        if body.acks != -1:  # answered at once, as the broker's handler does: a done future
            done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            done.set_result(response)
            return done
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        waiting.append(answer)

        async def acknowledged() -> Any:
            await answer
            events.append(f"produce {cid} acknowledged")
            return response

        return acknowledged()

    def metadata(_ctx: Any, request: Request) -> Any:
        events.append(f"metadata {request.header.correlation_id} handled")
        return build(request.response_type, throttle_time=0, brokers=[], cluster_id=None,
                     controller_id=-1, topics=[])  # fmt: skip

    handlers = {ApiKey.PRODUCE: produce, ApiKey.METADATA: metadata}
    versions = registry().versions.restrict(handlers)
    server = KafkaServer("127.0.0.1", 0, handlers, versions, 1 << 20, 0, ClientIdentity())
    await server.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(encode_request(1, _produce(-1)))  # waits for its acknowledgement
        writer.write(encode_request(2, _produce(-1)))  # pipelined behind it
        writer.write(encode_request(3, _produce(1)))  # answered at once, but after 1 and 2
        writer.write(encode_request(4, MetadataRequest(
            topics=None, allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )))  # fmt: skip
        writer.write(encode_request(5, _produce(1)))  # nothing ahead once 4 is answered
        await writer.drain()

        async def appended(count: int) -> None:
            while sum("appended" in e for e in events) < count:
                await asyncio.sleep(0.001)

        await asyncio.wait_for(appended(3), 5)
        assert not any("metadata" in e for e in events)  # behind the pending answers
        waiting[1].set_result(None)  # the second completes first...
        await asyncio.sleep(0)
        waiting[0].set_result(None)  # ...then the first
        order = [await asyncio.wait_for(_read_response(reader), 5) for _ in range(5)]
    finally:
        writer.close()
        await server.stop_accepting()
        await server.drain_and_close(5)
    return events, order


def test_produce_is_pipelined_and_answered_in_order() -> None:
    events, order = asyncio.run(_scenario())
    assert order == [1, 2, 3, 4, 5]
    assert events[:3] == ["produce 1 appended", "produce 2 appended", "produce 3 appended"]
    assert events.index("metadata 4 handled") > events.index("produce 1 acknowledged")
    assert events.index("produce 5 appended") > events.index("metadata 4 handled")
