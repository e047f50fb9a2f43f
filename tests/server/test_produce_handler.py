"""The Produce handler on a real ReplicaManager (sans-I/O: manual clock, no threads):
an acks=all request waiting for its followers must not keep its frame's buffer, so the
connection can receive the next large produce into the same buffer."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path
from typing import Any

from kio.schema.produce.v9.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from test_replica_manager import TP, Harness, batch

from sluice.protocol import decode_request, encode_request, encode_response_segments
from sluice.protocol.produce_response import encode_produce_response
from sluice.server.apis import produce, registry


class _TopicAdmin:
    def maybe_auto_create(self, topic: str) -> bool:
        return topic == TP.topic


class _Context:
    """What the handler uses of its RequestContext: the replica manager and topic lookup."""

    def __init__(self, harness: Harness) -> None:
        self.replica_manager = harness.rm
        self.topic_admin = _TopicAdmin()
        self.authorizer = None  # no authorization
        self.quotas = None  # no client quotas


def _frame(records: bytes) -> bytearray:
    """A Produce v9 request frame (no size prefix) in a bytearray, as the connection
    receives a large one: a buffer it reuses once no view of it is left."""
    request = ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(milliseconds=30_000),
        topic_data=(TopicProduceData(name=TP.topic, partition_data=(
            PartitionProduceData(index=TP.partition, records=records),)),),
    )  # fmt: skip
    return bytearray(encode_request(7, request)[4:])


def _released(buffer: bytearray) -> bool:
    try:  # resizing fails while any view of the buffer is alive
        buffer.append(0)
    except BufferError:
        return False
    del buffer[-1]
    return True


def test_a_waiting_acks_all_produce_lets_go_of_its_frame(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    harness.partition.isr = {0, 1}
    harness.partition.replica_leos[1] = 0  # a follower that has not fetched yet

    async def scenario() -> tuple[Any, bool, bool]:
        buffer = _frame(batch(b"a", b"b"))
        view = memoryview(buffer)
        request = decode_request(view, registry().versions)
        answer = produce.handle(_Context(harness), request)  # type: ignore[arg-type]
        assert not answer.done() and harness.rm.produce_purgatory.delayed == 1
        assert not _released(buffer)  # the decoded request's records are views of it
        del request, view
        free_while_waiting = _released(buffer)
        harness.partition.replica_leos[1] = 2  # the follower fetched both records
        assert harness.partition.maybe_increment_high_watermark()
        harness.rm.produce_purgatory.check_and_complete(TP)
        return answer.result(), free_while_waiting, harness.log.log_end_offset == 2

    try:
        response, free_while_waiting, appended = asyncio.run(scenario())
    finally:
        harness.rm.shutdown()
        harness.log.close()
    assert appended and free_while_waiting
    expected = encode_produce_response(9, [(TP.topic, [(TP.partition, 0, 0, -1, 0, None)])])
    assert b"".join(encode_response_segments(7, response)) == b"".join(
        encode_response_segments(7, expected)
    )
