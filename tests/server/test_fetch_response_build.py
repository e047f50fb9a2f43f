"""The Fetch handler's direct construction of kio's response classes, against ``build``."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.base import TopicPartition
from sluice.log.transaction_index import AbortedTxn
from sluice.protocol import ErrorCode, Request, apis
from sluice.protocol.headers import RequestHeader
from sluice.replication.fetch_session import FetchContext, FetchSessionCache, PartitionState
from sluice.replication.replica_manager import FetchPartitionData, PartitionFetch
from sluice.server.apis import fetch

DETERMINISTIC = settings(derandomize=True, max_examples=150, deadline=None)
VERSIONS = range(4, 13)
OFFSETS = st.integers(0, 2**40)
ERRORS = [ErrorCode.none, ErrorCode.offset_out_of_range, ErrorCode.not_leader_or_follower]


class Slice:
    """A stand-in for the log's FileSlice: a size, and ``read`` for small slices."""

    def __init__(self, size: int) -> None:
        self.position = 0
        self.size = size

    def fileno(self) -> int:
        raise AssertionError("not sent in this test")

    def read(self) -> bytes:
        return bytes([self.size % 251]) * self.size


def request(version: int) -> Request:
    header = RequestHeader(1, version, 7, "test", 2 if version >= 12 else 1)
    return Request(header, None)  # type: ignore[arg-type]


@st.composite
def results(draw: st.DrawFn) -> list[tuple[PartitionFetch, FetchPartitionData]]:
    out = []
    for topic in draw(st.lists(st.sampled_from("abc"), min_size=0, max_size=3, unique=True)):
        for partition in draw(st.lists(st.integers(0, 5), max_size=3, unique=True)):
            size = draw(st.sampled_from([None, 0, 10, fetch.SENDFILE_MIN_BYTES - 1,
                                         fetch.SENDFILE_MIN_BYTES, 300_000]))  # fmt: skip
            aborted = draw(
                st.none()
                | st.lists(
                    st.builds(AbortedTxn, OFFSETS, OFFSETS, st.just(0), st.just(0)),
                    max_size=3,
                )
            )
            data = FetchPartitionData(
                draw(st.sampled_from(ERRORS)),
                high_watermark=draw(st.integers(-1, 2**40)),
                last_stable_offset=draw(st.integers(-1, 2**40)),
                log_start_offset=draw(st.integers(-1, 2**40)),
                records=None if size is None else Slice(size),  # type: ignore[arg-type]
                aborted_transactions=aborted,
            )
            out.append((PartitionFetch(TopicPartition(topic, partition), 0, 1 << 20), data))
    return out


def same_records(fast: Any, general: Any) -> None:
    """Both responses equal, large slices being the very same object."""
    assert fast == general
    for ft, gt in zip(fast.responses, general.responses, strict=True):
        for fp, gp in zip(ft.partitions, gt.partitions, strict=True):
            if isinstance(fp.records, Slice):
                assert fp.records is gp.records


@DETERMINISTIC
@given(st.sampled_from(VERSIONS), results(), st.integers(0, 2**31 - 1))
def test_direct_response_equals_build(version: int, data: Any, session_id: int) -> None:
    context = FetchContext({}, error=ErrorCode.none, session_id=session_id)
    fast = fetch._response(request(version), context, data)
    general = fetch._response_general(request(version), context, data)
    assert type(fast) is apis.response_type(1, version)
    same_records(fast, general)


@DETERMINISTIC
@given(st.sampled_from(range(7, 13)), results(), results())
def test_incremental_sessions_answer_the_same(version: int, first: Any, second: Any) -> None:
    """An incremental fetch leaves out unchanged partitions alike in both builders."""
    tps = {f.tp: PartitionState(0, 1 << 20) for f, _ in first + second}
    answers = []
    for build in (fetch._response, fetch._response_general):
        cache = FetchSessionCache()
        cache._rng.seed(1)  # the same session id for both
        full = cache.new_context(0, 0, dict(tps), [], privileged=False, now_ms=0)
        build(request(version), full, first)
        session = full.session
        assert session is not None
        incremental = cache.new_context(session.id, 1, {}, [], privileged=False, now_ms=1)
        answers.append(build(request(version), incremental, second))
    same_records(answers[0], answers[1])


def test_error_context_answers_with_no_partitions() -> None:
    context = FetchContext({}, error=ErrorCode.fetch_session_id_not_found)
    for version in range(7, 13):
        fast = fetch._response(request(version), context, [])
        assert fast == fetch._response_general(request(version), context, [])
        assert fast.error_code == ErrorCode.fetch_session_id_not_found


def test_every_supported_version_has_the_direct_shape() -> None:
    for version in VERSIONS:
        assert fetch._shapes_of(apis.response_type(1, version)) is not None
