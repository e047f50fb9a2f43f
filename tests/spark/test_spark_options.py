"""The ``sluice`` source's option parsing and offset planning, without Spark running."""

from __future__ import annotations

import json

import pytest

from sluice.spark.offsets import DataLossError, check_progress, spread_limit
from sluice.spark.options import (
    ReaderOptions,
    SluiceOptionError,
    WriterOptions,
    offsets_from_json,
    offsets_to_json_dict,
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
        ({**BASE, "subscribe": "t", "maxOffsetsPerTrigger": "0"}, True, "positive integer"),
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
         "kafka.group.id": "ignored", "includeHeaders": "TRUE"},
        streaming=True,
    )  # fmt: skip
    assert parsed.subscription.topics == ("a", "b")
    assert parsed.consumer_config == {
        "bootstrap.servers": "127.0.0.1:9092", "isolation.level": "read_committed",
    }  # fmt: skip
    assert parsed.read_committed and parsed.include_headers and parsed.starting == "latest"


def test_writer_options_keep_the_producer_idempotent() -> None:
    parsed = WriterOptions.parse({**BASE, "topic": "out"})
    assert parsed.producer_config["enable.idempotence"] == "true"
    with pytest.raises(SluiceOptionError, match=r"enable\.idempotence=true"):
        WriterOptions.parse({**BASE, "kafka.enable.idempotence": "false"})
