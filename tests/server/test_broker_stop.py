"""A stopping broker answers the fetches waiting in its purgatory at once instead of
holding them to their max wait, so its drain of requests in flight does not run out."""

from __future__ import annotations

import logging
import re
import threading

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

import sluice
from sluice.log.file_work import FileThread
from support.waiting import wait_until

LONG_WAIT_MS = 20_000  # past the broker's 10-s drain: a held fetch would outlast it


def test_waiting_fetches_are_answered_when_the_broker_stops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    embedded = sluice.EmbeddedBroker().start()
    bootstrap = embedded.bootstrap_servers
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("quiet", 1, 1)])["quiet"].result(15)
        confluent = Consumer({
            "bootstrap.servers": bootstrap, "group.id": "stop", "enable.auto.commit": False,
            "fetch.wait.max.ms": LONG_WAIT_MS, "log_level": 0,
        })  # fmt: skip
        confluent.assign([TopicPartition("quiet", 0, 0)])
        kafka_python = KafkaConsumer(
            bootstrap_servers=bootstrap, fetch_max_wait_ms=LONG_WAIT_MS,
            request_timeout_ms=3 * LONG_WAIT_MS,
        )  # fmt: skip
        kafka_python.assign([KafkaTopicPartition("quiet", 0)])
        kafka_python.seek(KafkaTopicPartition("quiet", 0), 0)

        def both_waiting() -> bool:  # the partition is empty: polls return nothing
            confluent.poll(0.1)
            kafka_python.poll(timeout_ms=100)
            return bool(
                embedded.call(lambda: embedded.broker.replica_manager.fetch_purgatory.watched >= 2)
            )

        wait_until(both_waiting, 30, "a fetch from each consumer waiting on the empty partition")
        with caplog.at_level(logging.INFO, logger="sluice"):
            embedded.stop()
    finally:
        embedded.stop()
    messages = [r.getMessage() for r in caplog.records]
    answered = [
        m for m in messages if re.fullmatch(r"stopping: \d+ waiting fetches answered now", m)
    ]
    assert answered and int(answered[0].split()[1]) >= 2, messages
    assert not [m for m in messages if "still in flight" in m], messages
    assert any("stopped cleanly" in m for m in messages), messages
    confluent.close()
    kafka_python.close()


def _file_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("sluice-file-work-")]


def test_an_embedded_broker_runs_its_file_work_on_a_thread_it_joins_at_stop() -> None:
    """As the ``sluice broker`` process does: the LogManager's logs get the broker's file
    thread (sluice.log.file_work), started with the broker and ended by its stop."""
    before = _file_threads()
    embedded = sluice.EmbeddedBroker().start()
    try:
        file_work = embedded.broker.log_manager.file_work
        assert isinstance(file_work, FileThread) and file_work.in_background
        assert file_work.is_alive
        assert len(_file_threads()) == len(before) + 1
    finally:
        embedded.stop()
    assert not file_work.is_alive
    assert _file_threads() == before
