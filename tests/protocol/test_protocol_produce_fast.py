"""The Produce fast path against kio's general decoder: equal requests whenever it answers,
records as views of the frame, and the general path's verdict on anything unusual."""

from __future__ import annotations

import importlib
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader
from kio.static.primitive import i16, i32, i32Timedelta

from sluice.protocol import MalformedRequestError, decode_request, encode_request
from sluice.protocol.produce_fast import decode_produce_request
from sluice.server.apis import registry

SERVED = registry().versions  # what a broker accepts and advertises


VERSIONS = range(3, 12)
HEADER_OFFSET_NO_CLIENT = 10  # api key, version, correlation id, null client id


def _module(version: int) -> Any:
    return importlib.import_module(f"kio.schema.produce.v{version}.request")


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
records = st.one_of(st.none(), st.binary(max_size=300))


@st.composite
def produce_requests(draw: st.DrawFn, version: int) -> Any:
    m = _module(version)
    topics = tuple(
        m.TopicProduceData(
            name=draw(names),
            partition_data=tuple(
                m.PartitionProduceData(index=i32(draw(st.integers(-5, 2**31 - 1))), records=r)
                for r in draw(st.lists(records, max_size=4))
            ),
        )
        for _ in range(draw(st.integers(0, 3)))
    )
    return m.ProduceRequest(
        transactional_id=draw(st.one_of(st.none(), names)),
        acks=i16(draw(st.sampled_from([-1, 0, 1, 7]))),
        timeout=i32Timedelta.parse(timedelta(milliseconds=draw(st.integers(0, 2**31 - 1)))),
        topic_data=topics,
    )


def _general(frame: bytes, offset: int, version: int) -> Any:
    body, _ = entity_reader(_module(version).ProduceRequest)(frame, offset)
    return body


def _frame(body: Any) -> bytes:
    return encode_request(5, body, client_id=None)[4:]


def _body_offset(frame: bytes, version: int) -> int:
    return HEADER_OFFSET_NO_CLIENT + (1 if version >= 9 else 0)  # header tagged fields


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_fast_path_decodes_what_kio_decodes(data: st.DataObject) -> None:
    version = data.draw(st.sampled_from(VERSIONS))
    body = data.draw(produce_requests(version))
    frame = _frame(body)
    offset = _body_offset(frame, version)
    fast = decode_produce_request(frame, offset, version)
    assert fast == body == _general(frame, offset, version)
    assert type(fast) is type(body)
    for topic in fast.topic_data:
        for partition in topic.partition_data:
            assert partition.records is None or isinstance(partition.records, memoryview)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_whatever_the_fast_path_accepts_the_general_path_decodes_equally(
    data: st.DataObject,
) -> None:
    version = data.draw(st.sampled_from(VERSIONS))
    frame = bytearray(_frame(data.draw(produce_requests(version))))
    offset = _body_offset(bytes(frame), version)
    for _ in range(data.draw(st.integers(1, 3))):  # corrupt: flip bytes, cut, or extend
        kind = data.draw(st.sampled_from(["flip", "cut", "extend"]))
        if kind == "flip" and len(frame) > offset:
            at = data.draw(st.integers(offset, len(frame) - 1))
            frame[at] = data.draw(st.integers(0, 255))
        elif kind == "cut":
            del frame[data.draw(st.integers(offset, len(frame))) :]
        else:
            frame += data.draw(st.binary(min_size=1, max_size=4))
    raw = bytes(frame)
    fast = decode_produce_request(raw, offset, version)
    if fast is not None:
        assert fast == _general(raw, offset, version)


def test_decode_request_takes_the_fast_path_and_falls_back_on_bad_input() -> None:
    m = _module(9)
    body = m.ProduceRequest(
        transactional_id=None,
        acks=i16(1),
        timeout=i32Timedelta.parse(timedelta(seconds=1)),
        topic_data=(
            m.TopicProduceData(
                name="t", partition_data=(m.PartitionProduceData(index=i32(0), records=b"abc"),)
            ),
        ),
    )
    frame = _frame(body)
    request = decode_request(memoryview(frame).toreadonly(), SERVED)
    records = request.body.topic_data[0].partition_data[0].records  # type: ignore[attr-defined]
    assert isinstance(records, memoryview) and records == b"abc"
    truncated = frame[:-3]
    assert decode_produce_request(truncated, _body_offset(frame, 9), 9) is None
    try:
        decode_request(truncated, SERVED)
    except MalformedRequestError:
        return
    raise AssertionError("a truncated produce request must be malformed")
