"""The operator's log of a 3-broker cluster: one INFO line per event with its ids —
controller elected, leaders elected and taken over (one line per request, not per
partition), ISR shrink and expand, segment roll, group rebalance begin and complete —
and the same events as JSON lines with their ids as fields."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
import warnings

import pytest

from sluice.cli.log_format import JsonFormatter
from sluice.protocol import ApiKey, Request
from sluice.testing import EmbeddedCluster
from support.cluster import partition_metadata
from support.waiting import wait_until

PARTITIONS = 40


def _messages(caplog: pytest.LogCaptureFixture, pattern: str) -> list[logging.LogRecord]:
    compiled = re.compile(pattern)
    return [r for r in caplog.records if compiled.search(r.getMessage())]


def _json(record: logging.LogRecord) -> dict[str, object]:
    parsed = json.loads(JsonFormatter().format(record))
    assert isinstance(parsed, dict)
    return parsed


def test_cluster_events_are_logged_once_with_their_ids(
    caplog: pytest.LogCaptureFixture, topic: str
) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    caplog.set_level(logging.INFO, logger="sluice")
    overrides = {"replica.lag.time.max.ms": 1000}
    with EmbeddedCluster(brokers=3, broker_ids=[1, 2, 3], overrides=overrides) as cluster:
        # the controller
        elected = _messages(caplog, r"^\[Controller id=\d\] Elected as the controller")
        assert len(elected) == 1
        assert _json(elected[0])["event"] == "controller_elected"
        controller = _json(elected[0])["controller_id"]

        # a topic of many partitions: one line per broker and request, not per partition
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        created = NewTopic(topic, PARTITIONS, 3, config={"segment.bytes": "2000"})
        admin.create_topics([created])[topic].result(30)
        wait_until(
            lambda: len(_messages(caplog, rf"Became (leader|follower) of \d+ partitions.*{topic}"))
            >= 6,
            20, "each broker's leaders and followers",
        )  # fmt: skip
        (controller_line,) = _messages(caplog, rf"Elected leaders of {PARTITIONS} partitions")
        text = controller_line.getMessage()
        assert f"[Controller id={controller} " in text
        assert "(NewPartition to OnlinePartition)" in text and f"and {PARTITIONS - 10} more" in text
        fields = _json(controller_line)
        assert fields["event"] == "leaders_elected"
        assert fields["partition_count"] == PARTITIONS
        became = _messages(caplog, rf"Became (leader|follower) of \d+ partitions.*{topic}")
        led = sum(int(re.search(r"Became leader of (\d+)", r.getMessage())[1])  # type: ignore[index]
                  for r in became if "Became leader" in r.getMessage())  # fmt: skip
        assert led == PARTITIONS
        assert all(_json(r)["broker_id"] in (1, 2, 3) for r in became)
        assert _messages(caplog, rf"{topic}-\d+: leader at epoch") == []  # those are DEBUG

        # ISR shrink: the leader of partition 0 stops hearing from one follower
        p0 = wait_until(lambda: partition_metadata(cluster.bootstrap_servers, topic, 0))
        leader = p0.leader
        follower = next(r for r in p0.replicas if r != leader)

        def starve(request: Request) -> object:
            if getattr(request.body, "replica_id", -1) == follower or (
                getattr(getattr(request.body, "replica_state", None), "replica_id", -1) == follower
            ):
                return asyncio.sleep(0.5)  # its fetches stall: it falls behind
            return None

        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": 1})
        control = cluster.control(leader, ApiKey.FETCH, starve, keep=True)
        for _ in range(30):
            producer.produce(topic, value=b"v" * 200, partition=0)
            producer.flush(10)
        shrink = rf"^\[Partition {topic}-0 broker={leader}\] Shrinking ISR from"
        wait_until(lambda: _messages(caplog, shrink), 30, "the ISR shrinks")
        control.remove()
        expand = rf"^\[Partition {topic}-0 broker={leader}\] Expanding ISR from"
        wait_until(lambda: _messages(caplog, expand), 30, "the ISR expands again")
        shrunk = _json(_messages(caplog, shrink)[0])
        assert shrunk["event"] == "isr_shrink" and shrunk["topic"] == topic
        assert shrunk["partition"] == 0 and follower not in shrunk["isr"]  # type: ignore[operator]
        assert isinstance(shrunk["leader_epoch"], int)

        # segment roll (segment.bytes=2000)
        rolled = _messages(caplog, rf"^{topic}-0: rolled new log segment at offset")
        assert rolled and _json(rolled[0])["event"] == "segment_roll"

        # a group rebalance, begun and completed, with a pure-Python client
        group = f"g-{uuid.uuid4().hex[:8]}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka import KafkaConsumer

        consumer = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers,
                                 group_id=group, consumer_timeout_ms=500)  # fmt: skip
        try:
            stable = (
                rf"^Stabilized group {group} generation 1 \(__consumer_offsets-\d+\) with 1 members"
            )
            wait_until(
                lambda: (consumer.poll(100), _messages(caplog, stable))[1], 30, "a stable group"
            )
        finally:
            consumer.close()
        (begin,) = _messages(caplog, rf"^Preparing to rebalance group {group} in state Empty "
                                     r"with old generation 0 and 1 members")  # fmt: skip
        begin_fields, end_fields = _json(begin), _json(_messages(caplog, stable)[0])
        assert begin_fields["event"] == "rebalance_begin" and begin_fields["group_id"] == group
        assert (end_fields["event"], end_fields["generation_id"], end_fields["member_count"]) == (
            "rebalance_complete",
            1,
            1,
        )
