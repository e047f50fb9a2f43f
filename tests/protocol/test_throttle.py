"""Reading and raising a response's throttle time, and a connection muted by a throttle."""

from __future__ import annotations

import datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from kio.schema.create_topics.v7.response import CreateTopicsResponse
from kio.schema.metadata.v12.request import MetadataRequest

from sluice.protocol import VersionTable, encode_request
from sluice.protocol.produce_response import encode_produce_response
from sluice.protocol.server_connection import ServerConnection
from sluice.protocol.throttle import NoResponse, throttle_time_ms, with_throttle_time
from sluice.server.apis import registry

VERSIONS: VersionTable = registry().versions


@given(
    st.integers(3, 11),
    st.lists(st.tuples(st.text(max_size=5), st.integers(0, 3)), max_size=3),
    st.integers(0, 2**31 - 1),
)
def test_a_produce_answers_throttle_is_rewritten_in_place(
    version: int, topics: list[tuple[str, int]], throttle: int
) -> None:
    results = [(name, [(p, 0, 7, -1, 0, None) for p in range(n)]) for name, n in topics]
    plain = encode_produce_response(version, results)
    assert throttle_time_ms(plain) == 0
    raised = with_throttle_time(plain, throttle)
    assert raised == encode_produce_response(version, results, throttle)
    assert throttle_time_ms(raised) == throttle


def test_kio_responses_and_no_response() -> None:
    response = CreateTopicsResponse(throttle_time=datetime.timedelta(0), topics=())
    assert throttle_time_ms(response) == 0
    raised = with_throttle_time(response, 1500)
    assert throttle_time_ms(raised) == 1500 and isinstance(raised, CreateTopicsResponse)
    assert throttle_time_ms(None) == 0 and with_throttle_time(None, 5) is None
    assert throttle_time_ms(with_throttle_time(NoResponse(1), 9)) == 9


def test_a_throttled_connection_reads_and_hands_out_nothing_until_it_ends() -> None:
    conn: ServerConnection[Any] = ServerConnection(VERSIONS, 1 << 20)
    metadata = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    frames = encode_request(1, metadata) + encode_request(2, metadata)
    view = conn.get_buffer(len(frames))
    view[: len(frames)] = frames
    conn.buffer_updated(len(frames))
    request = conn.next_request()
    assert request is not None
    conn.respond_framed(b"answer")
    conn.start_throttling()
    assert conn.throttled and conn.reading_paused
    assert conn.data_to_send() == [b"answer"]  # the answer goes out first (KIP-219)
    assert conn.next_request() is None and conn.has_frames  # muted
    assert not conn.read_timed_out(0.0, 1.0) and not conn.read_timed_out(100.0, 1.0)
    conn.start_throttling()  # a second throttle in force
    conn.end_throttling()
    assert conn.throttled and conn.next_request() is None
    conn.end_throttling()
    assert not conn.throttled and not conn.reading_paused
    second = conn.next_request()
    assert second is not None and second.header.correlation_id == 2
