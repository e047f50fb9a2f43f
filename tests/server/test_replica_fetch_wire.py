"""The replica fetcher's hand-written Fetch v11 envelope against kio's general codec."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.fetch.v11 import request as kreq
from kio.schema.fetch.v11 import response as kres
from kio.static.primitive import i32, i64

from sluice.protocol import ErrorCode, MalformedRequestError, encode_request, encode_response
from sluice.protocol.responses import decode_response
from sluice.server.replica_fetch_wire import (
    FetchPartitionRequest,
    decode_fetch_response,
    encode_fetch_request,
)

DETERMINISTIC = settings(derandomize=True, max_examples=80, deadline=None)

i32s = st.integers(-(2**31), 2**31 - 1)
i64s = st.integers(-(2**63), 2**63 - 1)
names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
requests = st.lists(
    st.tuples(
        names,
        st.lists(st.tuples(i32s, i32s, i64s, i64s, i32s).map(lambda t: FetchPartitionRequest(*t))),
    ),
    max_size=4,
)


@DETERMINISTIC
@given(
    correlation_id=i32s, client_id=names, replica_id=i32s,
    max_wait_ms=st.integers(0, 2**31 - 1), min_bytes=i32s, max_bytes=i32s, topics=requests,
)  # fmt: skip
def test_fetch_request_is_byte_for_byte_kio(
    correlation_id: int, client_id: str, replica_id: int, max_wait_ms: int, min_bytes: int,
    max_bytes: int, topics: list[tuple[str, list[FetchPartitionRequest]]],
) -> None:  # fmt: skip
    body = kreq.FetchRequest(
        replica_id=replica_id, max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=i32(min_bytes), max_bytes=i32(max_bytes), isolation_level=0,
        session_id=i32(0), session_epoch=i32(-1),
        topics=tuple(
            kreq.FetchTopic(topic=t, partitions=tuple(
                kreq.FetchPartition(
                    partition=i32(p.partition), current_leader_epoch=i32(p.current_leader_epoch),
                    fetch_offset=i64(p.fetch_offset), log_start_offset=i64(p.log_start_offset),
                    partition_max_bytes=i32(p.partition_max_bytes),
                ) for p in ps))
            for t, ps in topics
        ),
        forgotten_topics_data=(), rack_id="",
    )  # fmt: skip
    expected = encode_request(correlation_id, body, client_id)
    got = encode_fetch_request(
        correlation_id, client_id, replica_id, max_wait_ms, min_bytes, max_bytes, topics
    )
    assert got == expected


aborted = st.lists(st.tuples(i64s, i64s), max_size=3)
partitions = st.lists(
    st.tuples(
        i32s,
        st.sampled_from([0, 1, 3, 6, 74]),
        i64s,
        i64s,
        i64s,
        st.none() | aborted,
        i32s,
        st.none() | st.binary(max_size=300),
    ),
    max_size=4,
)


def kio_response(topics: list[tuple[str, list[Any]]]) -> Any:
    return kres.FetchResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, session_id=i32(0),
        responses=tuple(
            kres.FetchableTopicResponse(topic=t, partitions=tuple(
                kres.PartitionData(
                    partition_index=i32(index), error_code=ErrorCode(error),
                    high_watermark=i64(hw), last_stable_offset=i64(lso),
                    log_start_offset=i64(start),
                    aborted_transactions=None if txns is None else tuple(
                        kres.AbortedTransaction(producer_id=i64(pid), first_offset=i64(first))
                        for pid, first in txns
                    ),
                    preferred_read_replica=i32(preferred), records=records,
                ) for index, error, hw, lso, start, txns, preferred, records in ps))
            for t, ps in topics
        ),
    )  # fmt: skip


def response_frame(correlation_id: int, response: Any) -> bytes:
    framed = encode_response(correlation_id, response, use_kio=True)
    return bytes(framed[4:])


@DETERMINISTIC
@given(correlation_id=i32s, topics=st.lists(st.tuples(names, partitions), max_size=4))
def test_fetch_response_decodes_as_kio_does(
    correlation_id: int, topics: list[tuple[str, list[Any]]]
) -> None:
    frame = response_frame(correlation_id, kio_response(topics))
    reference = decode_response(frame, 1, 11)
    got_id, got_error, got = decode_fetch_response(bytearray(frame))
    assert (got_id, got_error) == (reference.correlation_id, reference.body.error_code)
    expected = [
        (t.topic, p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
         p.log_start_offset, None if p.records is None else bytes(p.records))
        for t in reference.body.responses for p in t.partitions
    ]  # fmt: skip
    assert [
        (p.topic, p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
         p.log_start_offset, None if p.records is None else bytes(p.records))
        for p in got
    ] == expected  # fmt: skip


def test_records_are_views_into_the_frame() -> None:
    frame = bytearray(
        response_frame(7, kio_response([("t", [(0, 0, 5, 5, 0, None, -1, b"abcdef")])]))
    )
    _, _, (partition,) = decode_fetch_response(frame)
    assert partition.records is not None and partition.records.obj is frame


@DETERMINISTIC
@given(topics=st.lists(st.tuples(names, partitions), min_size=1, max_size=3), data=st.data())
def test_truncated_or_padded_frames_are_refused(topics: Any, data: st.DataObject) -> None:
    frame = response_frame(1, kio_response(topics))
    cut = data.draw(st.integers(0, len(frame) - 1))
    with pytest.raises(MalformedRequestError):
        decode_fetch_response(frame[:cut])
    with pytest.raises(MalformedRequestError):
        decode_fetch_response(frame + b"\0")
