"""The hand-written ProduceResponse encoder against kio's writer, byte for byte."""

from __future__ import annotations

import importlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.protocol import ErrorCode, encode_response, encode_response_segments
from sluice.protocol.build import build
from sluice.protocol.produce_response import encode_produce_response

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=10)
results = st.tuples(
    st.integers(0, 2**31 - 1),
    st.sampled_from([int(code) for code in ErrorCode][:40]),
    st.integers(-1, 2**62),
    st.one_of(st.just(-1), st.integers(0, 2**41)),  # append time: none, or epoch ms
    st.integers(-1, 2**62),
    st.one_of(st.none(), names),
)


def _kio_response(version: int, topics: list[tuple[str, list[Any]]]) -> Any:
    cls = importlib.import_module(f"kio.schema.produce.v{version}.response").ProduceResponse
    return build(
        cls,
        throttle_time=0,
        responses=[
            {
                "name": name,
                "partition_responses": [
                    {
                        "index": index,
                        "error_code": error,
                        "base_offset": base,
                        "log_append_time": None if append < 0 else append,
                        "log_start_offset": start,
                        "record_errors": [],
                        "error_message": message,
                    }
                    for index, error, base, append, start, message in partitions
                ],
            }
            for name, partitions in topics
        ],
    )


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(3, 11),
    topics=st.lists(st.tuples(names, st.lists(results, max_size=4)), max_size=4),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
)
def test_fast_encoder_writes_what_kio_writes(
    version: int, topics: list[tuple[str, list[Any]]], correlation_id: int
) -> None:
    fast = encode_produce_response(version, topics)
    expected = encode_response(correlation_id, _kio_response(version, topics))
    assert encode_response(correlation_id, fast) == expected
    assert b"".join(encode_response_segments(correlation_id, fast)) == expected


def test_versions_outside_the_fast_range_are_refused() -> None:
    for version in (2, 12):
        try:
            encode_produce_response(version, [])
        except ValueError:
            continue
        raise AssertionError(f"v{version} must be refused")
