"""The ``sluice`` source's option parsing and offset planning (range splitting, the
micro-batch limits, the lag metrics), without Spark running."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.spark.offsets import (
    DataLossError,
    TriggerDelay,
    check_progress,
    offsets_behind_latest,
    resolve,
    source_metrics,
    split_ranges,
    spread_limit,
)
from sluice.spark.options import (
    ByTimestamp,
    ReaderOptions,
    SluiceOptionError,
    WriterOptions,
    offsets_from_json,
    offsets_to_json_dict,
    time_string_ms,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_offsets_json_is_stable_and_round_trips() -> None:
    offsets = {("b", 10): 5, ("b", 2): 7, ("a", 0): -2}
    as_json = json.dumps(offsets_to_json_dict(offsets))
    assert as_json == '{"a": {"0": -2}, "b": {"2": 7, "10": 5}}'
    assert offsets_from_json(as_json, "x") == offsets


def test_spread_limit_shares_by_lag_and_never_exceeds() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 50}
    latest = {("t", 0): 90, ("t", 1): 110, ("t", 2): 50}
    end = spread_limit(start, latest, 20)
    admitted = {tp: end[tp] - start[tp] for tp in start}
    assert sum(admitted.values()) == 20
    assert admitted == {("t", 0): 18, ("t", 1): 2, ("t", 2): 0}
    assert spread_limit(start, latest, 1000) == latest
    # a partition new to the query starts at 0 in the caller's start map
    assert spread_limit({("t", 0): 0}, {("t", 0): 3}, 1) == {("t", 0): 1}


def test_check_progress_offsets_going_backwards() -> None:
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        check_progress({("t", 0): 10}, {("t", 0): 4}, fail=True)
    with pytest.raises(DataLossError, match="is gone"):
        check_progress({("t", 0): 10}, {}, fail=True)
    assert check_progress({("t", 0): 10}, {("t", 0): 4}, fail=False) == {("t", 0): 4}


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"subscribe": "t"}, True, "kafka.bootstrap.servers is required"),
        ({**BASE}, True, "exactly one of the options subscribe"),
        ({**BASE, "subscribe": "t", "assign": '{"t": [0]}'}, True, "exactly one"),
        ({**BASE, "assign": "[0]"}, False, "assign must be JSON"),
        ({**BASE, "subscribePattern": "("}, True, "is not a regex"),
        ({**BASE, "subscribe": "t", "startingOffsets": "{bad"}, True, "not valid JSON"),
        ({**BASE, "subscribe": "t", "startingOffsets": '{"t": {"0": -3}}'}, True, "-2 or -1"),
        ({**BASE, "subscribe": "t", "endingOffsets": "latest"}, True, "batch queries only"),
        ({**BASE, "subscribe": "t", "maxOffsetsPerTrigger": "0"}, True, "must be positive"),
        ({**BASE, "subscribe": "t", "failOnDataLoss": "maybe"}, True, "true or false"),
        ({**BASE, "subscribe": "t", "startingOfsets": "earliest"}, True, "unknown source"),
    ],
)
def test_reader_options_are_checked(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(SluiceOptionError, match=message):
        ReaderOptions.parse(options, streaming=streaming)


def test_reader_options_pass_kafka_settings_to_the_consumer() -> None:
    parsed = ReaderOptions.parse(
        {**BASE, "subscribe": "a, b", "kafka.isolation.level": "read_committed",
         "kafka.group.id": "analytics", "includeHeaders": "TRUE"},
        streaming=True,
    )  # fmt: skip
    assert parsed.subscription.topics == ("a", "b")
    assert parsed.consumer_config == {
        "bootstrap.servers": "127.0.0.1:9092", "isolation.level": "read_committed",
        "group.id": "analytics", "client.id": "consumer-analytics",
    }  # fmt: skip
    assert parsed.driver_config() == parsed.consumer_config
    assert parsed.read_committed and parsed.include_headers and parsed.starting == "latest"


def test_writer_options_keep_the_producer_idempotent() -> None:
    parsed = WriterOptions.parse({**BASE, "topic": "out"})
    assert parsed.producer_config["enable.idempotence"] == "true"
    with pytest.raises(SluiceOptionError, match=r"enable\.idempotence=true"):
        WriterOptions.parse({**BASE, "kafka.enable.idempotence": "false"})


def test_group_ids_are_unique_per_query_unless_given() -> None:
    stream = ReaderOptions.parse({**BASE, "subscribe": "t", "groupIdPrefix": "etl"}, True)
    group = stream.consumer_config["group.id"]
    assert re.fullmatch(r"etl-[0-9a-f-]{36}-executor", group)
    assert stream.consumer_config["client.id"] == f"consumer-{group}"
    driver = stream.driver_config()
    assert driver["group.id"] == group.removesuffix("executor") + "driver"
    assert driver["client.id"] == f"consumer-{driver['group.id']}"
    batch = ReaderOptions.parse({**BASE, "subscribe": "t"}, False).consumer_config["group.id"]
    assert batch.startswith("spark-kafka-relation-") and batch != group
    again = ReaderOptions.parse({**BASE, "subscribe": "t"}, True).consumer_config["group.id"]
    assert again.startswith("spark-kafka-source-")
    # kafka.client.id wins over the derived client id, for the driver too
    named = ReaderOptions.parse({**BASE, "subscribe": "t", "kafka.client.id": "app"}, True)
    assert named.consumer_config["client.id"] == named.driver_config()["client.id"] == "app"


def test_timestamp_options_take_precedence_in_spark_order() -> None:
    both = {**BASE, "subscribe": "t", "startingOffsets": "earliest"}
    by_json = ReaderOptions.parse(
        {**both, "startingOffsetsByTimestamp": '{"t": {"0": 5, "1": 7}}'}, True
    ).starting
    assert by_json == ByTimestamp(per_partition={("t", 0): 5, ("t", 1): 7})
    everywhere = ReaderOptions.parse(
        {**both, "startingOffsetsByTimestamp": '{"t": {"0": 5}}', "startingTimestamp": "9",
         "startingOffsetsByTimestampStrategy": "LATEST"}, True,
    ).starting  # fmt: skip
    assert everywhere == ByTimestamp(everywhere=9, latest_when_unmatched=True)
    ending = ReaderOptions.parse(
        {**BASE, "subscribe": "t", "endingTimestamp": "10", "endingOffsets": "latest"}, False
    ).ending
    assert ending == ByTimestamp(everywhere=10, latest_when_unmatched=True)


def test_time_strings_are_sparks() -> None:
    assert time_string_ms("15m", "x") == 900_000
    assert time_string_ms("2 s", "x") == 2000
    assert time_string_ms("250", "x") == 250
    assert time_string_ms("1min", "x") == 60_000
    assert time_string_ms("1h", "x") == 3_600_000
    with pytest.raises(SluiceOptionError, match=r"E\.g\. 50s, 100ms"):
        time_string_ms("soon", "maxTriggerDelay")
    with pytest.raises(SluiceOptionError, match=r"E\.g\. 50s"):
        time_string_ms("1.5s", "maxTriggerDelay")


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"startingTimestamp": "soon"}, True, "Expected a single long value, got soon"),
        ({"startingTimestamp": "-1"}, True, "must be >= 0"),
        ({"startingOffsetsByTimestamp": '{"t": {"0": -2}}'}, True, "milliseconds >= 0"),
        ({"startingOffsetsByTimestamp": "{"}, True, "not valid JSON"),
        ({"startingOffsetsByTimestampStrategy": "skip"}, True, "must be error or latest"),
        ({"endingTimestamp": "5"}, True, "ending timestamp not valid in streaming queries"),
        ({"endingOffsetsByTimestamp": '{"t": {"0": 5}}'}, True, "ending timestamp not valid"),
        ({"startingTimestamp": "9", "endingTimestamp": "5"}, False, "is after endingTimestamp"),
        ({"minPartitions": "0"}, False, "minPartitions must be positive"),
        ({"minPartitions": "many"}, False, "minPartitions must be an integer"),
        ({"maxRecordsPerPartition": "-4"}, True, "maxRecordsPerPartition must be positive"),
        ({"minOffsetsPerTrigger": "0"}, True, "minOffsetsPerTrigger must be positive"),
        (
            {"minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "10"}, True,
            r"minOffsetPerTrigger\(20\) is higher than the maxOffsetsPerTrigger\(10\)",
        ),
        ({"maxTriggerDelay": "later"}, True, "not a time"),
        ({"kafka.auto.offset.reset": "earliest"}, True, "'auto.offset.reset' is not supported"),
        ({"kafka.enable.auto.commit": "true"}, False, "'enable.auto.commit' is not supported"),
        ({"kafka.value.deserializer": "x"}, True, "deserialized as byte arrays"),
    ],
)  # fmt: skip
def test_new_reader_options_are_checked(
    options: dict[str, str], streaming: bool, message: str
) -> None:
    with pytest.raises(SluiceOptionError, match=message):
        ReaderOptions.parse({**BASE, "subscribe": "t", **options}, streaming=streaming)


def _sizes(ranges: list[tuple[str, int, int, int]]) -> list[tuple[int, int, int]]:
    return [(p, start, end) for _, p, start, end in ranges]


def test_split_ranges_like_sparks_range_calculator() -> None:
    ranges = [("t", 0, 0, 100), ("t", 1, 0, 10), ("t", 2, 5, 5)]
    # no options: one range per partition, empty ones dropped
    assert _sizes(split_ranges(ranges, None, None)) == [(0, 0, 100), (1, 0, 10)]
    # already enough partitions
    assert _sizes(split_ranges(ranges, 2, None)) == [(0, 0, 100), (1, 0, 10)]
    # 10 wanted: the small range stays whole, the large one takes the other 9 pieces
    pieces = split_ranges(ranges, 10, None)
    assert _sizes(pieces)[-1] == (1, 0, 10)
    big = [p for p in pieces if p[1] == 0]
    assert len(big) == 9 and [p[3] - p[2] for p in big] == [11, 11, 11, 11, 11, 11, 11, 11, 12]
    assert all(a[3] == b[2] for a, b in itertools.pairwise(big))
    # at most 30 records a piece: ceil(100/30) = 4 pieces of 25, and the 10 whole
    assert _sizes(split_ranges(ranges, None, 30)) == [
        (0, 0, 25), (0, 25, 50), (0, 50, 75), (0, 75, 100), (1, 0, 10),
    ]  # fmt: skip
    # both: maxRecordsPerPartition first, then minPartitions on the pieces
    both = split_ranges([("t", 0, 0, 100)], 4, 50)
    assert _sizes(both) == [(0, 0, 25), (0, 25, 50), (0, 50, 75), (0, 75, 100)]
    assert len(split_ranges([("t", 0, 0, 100)], 3, 10)) == 10
    # a range smaller than the pieces asked for is cut into single offsets at most
    assert _sizes(split_ranges([("t", 0, 7, 9)], 5, None)) == [(0, 7, 8), (0, 8, 9)]


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 1000), st.integers(0, 1000)), max_size=6),
    st.one_of(st.none(), st.integers(1, 40)),
    st.one_of(st.none(), st.integers(1, 500)),
)
def test_split_ranges_covers_every_offset_once(
    raw: list[tuple[int, int, int]], min_partitions: int | None, max_records: int | None
) -> None:
    ranges = [("t", p, min(a, b), max(a, b)) for p, a, b in {r[0]: r for r in raw}.values()]
    pieces = split_ranges(ranges, min_partitions, max_records)
    covered = sorted((p, o) for _, p, start, end in pieces for o in range(start, end))
    assert covered == sorted((p, o) for _, p, start, end in ranges for o in range(start, end))
    assert all(end > start for _, _, start, end in pieces)
    if max_records is not None:
        assert all(end - start <= max_records for _, _, start, end in pieces)
    if min_partitions is None and max_records is None:
        assert len(pieces) == sum(1 for r in ranges if r[3] > r[2])


def test_trigger_delay_waits_for_min_offsets_or_the_max_delay() -> None:
    now = [1_000_000.0]
    delay = TriggerDelay(min_offsets=10, max_delay_ms=5_000, clock_ms=lambda: now[0])
    assert not delay.delay(3)  # the first trigger always goes (Spark's, too)
    now[0] += 1_000
    assert delay.delay(9)
    assert not delay.delay(10)  # enough offsets: goes, and the delay restarts
    now[0] += 4_999
    assert delay.delay(2)
    now[0] += 1
    assert not delay.delay(0)  # 5 s since the last batch: goes even with nothing new
    assert delay.delay(0)


def test_offsets_behind_latest_metrics() -> None:
    consumed = {("t", 0): 10, ("t", 1): 4}
    latest = {("t", 0): 15, ("t", 1): 4, ("t", 2): 3}  # partition 2 is new: 3 behind
    assert offsets_behind_latest(consumed, latest) == {
        "minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "5",
        "avgOffsetsBehindLatest": str(8 / 3),
    }  # fmt: skip
    assert offsets_behind_latest(consumed, {}) == {}
    progress = {"endOffset": '{"t": {"0": 10}}', "latestOffset": '{"t": {"0": 12}}'}
    assert source_metrics(progress)["maxOffsetsBehindLatest"] == "2"
    assert source_metrics({"endOffset": None, "latestOffset": None}) == {}


class _FakeOffsets:
    """The OffsetReader calls resolve makes, over fixed logs: offsets 0..9 per partition,
    the record at offset i stamped 100 * i."""

    def __init__(self, options: ReaderOptions) -> None:
        self.options = options

    def earliest(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return {tp: 0 for tp in tps}

    def latest(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return {tp: 10 for tp in tps}

    def for_times(self, times: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        return {tp: -(-ts // 100) for tp, ts in times.items() if ts <= 900}


def test_resolve_timestamps_and_unnamed_assigned_partitions() -> None:
    tps = [("t", 0), ("t", 1)]
    sub = {**BASE, "assign": '{"t": [0, 1]}'}

    def offsets(options: dict[str, str], what: str, streaming: bool = False) -> dict[Any, int]:
        parsed = ReaderOptions.parse({**sub, **options}, streaming=streaming)
        spec = parsed.ending if what.startswith("ending") else parsed.starting
        return resolve(spec, tps, _FakeOffsets(parsed), what)  # type: ignore[arg-type]

    assert offsets({"startingTimestamp": "250"}, "startingOffsets") == {("t", 0): 3, ("t", 1): 3}
    with pytest.raises(ValueError, match=r"No offset matched .* t-0 and timestamp 5000"):
        offsets({"startingTimestamp": "5000"}, "startingOffsets")
    late = {"startingTimestamp": "5000", "startingOffsetsByTimestampStrategy": "latest"}
    assert offsets(late, "startingOffsets") == {("t", 0): 10, ("t", 1): 10}
    assert offsets({"endingTimestamp": "5000"}, "endingOffsets") == {("t", 0): 10, ("t", 1): 10}
    # with assign, a partition the JSON leaves out starts at earliest and ends at latest
    one = json.dumps({"t": {"1": 400}})
    assert offsets({"startingOffsetsByTimestamp": one}, "startingOffsets") == {
        ("t", 0): 0, ("t", 1): 4,
    }  # fmt: skip
    assert offsets({"endingOffsetsByTimestamp": one}, "endingOffsets") == {
        ("t", 0): 10, ("t", 1): 4,
    }  # fmt: skip
    assert offsets({"endingOffsets": json.dumps({"t": {"1": 5}})}, "endingOffsets") == {
        ("t", 0): 10, ("t", 1): 5,
    }  # fmt: skip
    with pytest.raises(ValueError, match="do not exist"):
        offsets({"startingOffsetsByTimestamp": json.dumps({"t": {"7": 1}})}, "startingOffsets")
