"""A full log dir, with real clients: KAFKA_STORAGE_ERROR, the other dir serves, nothing
acknowledged is lost.

The broker's ``log.dirs`` are a large dir (which also holds the broker's own files) and a
small one; topic ``full`` is placed in the small one, ``other`` in the large one.
confluent-kafka produces to ``full`` (acks=all, no retries) until a delivery fails: from
then on every produce to it, from confluent-kafka and kafka-python alike, fails with
KAFKA_STORAGE_ERROR, and no connection is closed for it; ``other`` takes and serves
records as before; the broker logs the failure once, without a traceback. Once space is
back the broker is restarted, and every acknowledged record of ``full`` is read back.

Two ways to fill the dir:

* ``test_a_full_tmpfs_log_dir``: a real ``sluice broker`` process whose small dir is a
  tmpfs of 8 MiB mounted for the test (root only; skipped with the reason where
  mounting is refused) and grown with ``mount -o remount,size=`` before the restart;
* ``test_an_injected_full_log_dir``: an embedded broker whose writes under the small dir
  fail with ``ENOSPC`` after 2 MiB (``support.disk_faults``), for machines that cannot
  mount; it checks the same, except that the failure is injected at the file layer.

The figures of a run are printed (``-s``): records acknowledged and kept."""

from __future__ import annotations

import errno
import logging
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.testing import EmbeddedBroker
from support.brokers import BrokerProcess
from support.disk_faults import DiskFaults
from support.waiting import wait_until

FULL, OTHER = "full", "other"
VALUE_BYTES = 1000
SMALL_BYTES = 8 * 1024 * 1024


def _value(i: int) -> bytes:
    return b"%08d" % i + b"." * (VALUE_BYTES - 8)


def _create_topics(bootstrap: str) -> None:
    """``other`` first: its log goes to the first dir (the large one, which holds the
    broker's own files), ``full``'s then to the second, the one with fewer logs."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic in (OTHER, FULL):
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def _fill(bootstrap: str) -> tuple[set[int], dict[str, int]]:
    """Produce to ``full`` until deliveries fail, then 100 more: the indexes acknowledged
    and the delivery errors by name."""
    from confluent_kafka import Producer

    acked: set[int] = set()
    errors: dict[str, int] = {}

    def delivered(error: object, message: object) -> None:
        if error is None:
            acked.add(int(message.value()[:8]))  # type: ignore[attr-defined]
        else:
            name = error.name()  # type: ignore[attr-defined]
            errors[name] = errors.get(name, 0) + 1

    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "retries": 0, "linger.ms": 5,
         "message.timeout.ms": 15_000}
    )  # fmt: skip
    sent = 0
    deadline = time.monotonic() + 120
    while not errors and time.monotonic() < deadline:
        for _ in range(200):
            producer.produce(FULL, _value(sent), on_delivery=delivered)
            sent += 1
        producer.poll(0.02)
    assert producer.flush(30) == 0 and errors, "the dir never filled up"
    before = dict(errors)
    for _ in range(100):
        producer.produce(FULL, _value(sent), on_delivery=delivered)
        sent += 1
    assert producer.flush(30) == 0
    assert sum(errors.values()) - sum(before.values()) == 100  # every one refused
    return acked, errors


def _kafka_python_is_refused(bootstrap: str) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaStorageError

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0)
    try:
        with pytest.raises(KafkaStorageError):
            producer.send(FULL, _value(10**7)).get(timeout=15)
    finally:
        producer.close()


def _other_serves(bootstrap: str, count: int = 500) -> None:
    from confluent_kafka import Producer

    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(OTHER, _value(i), on_delivery=lambda e, _m: e and errors.append(e))
    assert producer.flush(30) == 0 and errors == []
    assert len(_read_all(bootstrap, OTHER)) >= count


def _read_all(bootstrap: str, topic: str) -> list[bytes]:
    """Every record of ``topic``'s partition 0 up to its high watermark (confluent-kafka)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False})  # fmt: skip
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values: list[bytes] = []
        last = [-1]

        def caught_up() -> bool:
            for message in consumer.consume(1000, 0.5):
                if not message.error():
                    values.append(message.value())
                    last[0] = message.offset()
            return last[0] >= end - 1

        wait_until(caught_up, 60, f"{topic} read up to offset {end}")
        return values
    finally:
        consumer.close()


def _check_kept(bootstrap: str, acked: set[int], label: str) -> None:
    kept = {int(v[:8]) for v in _read_all(bootstrap, FULL)}
    lost = acked - kept
    print(f"\n{label}: {len(acked)} records acknowledged, {len(acked & kept)} kept, "
          f"{len(lost)} lost, {len(kept - acked)} kept without acknowledgement")  # fmt: skip
    assert not lost


# -- a real full filesystem ----------------------------------------------------------------
@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs mounted at ``tmp_path/small`` for the test, unmounted after it."""
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SMALL_BYTES}", "tmpfs", str(small)],
        capture_output=True, text=True,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'not root'})")
    try:
        yield small
    finally:
        subprocess.run(["umount", str(small)], check=True)


def test_a_full_tmpfs_log_dir(tmp_path: Path, tmpfs: Path) -> None:
    big = tmp_path / "big"
    broker = BrokerProcess(big, **{"log.dirs": f"{big},{tmpfs}"}).start()
    try:
        _create_topics(broker.bootstrap)
        assert (tmpfs / f"{FULL}-0").is_dir() and (big / f"{OTHER}-0").is_dir()
        acked, errors = _fill(broker.bootstrap)
        assert set(errors) == {"KAFKA_STORAGE_ERROR"}, errors
        _kafka_python_is_refused(broker.bootstrap)
        _other_serves(broker.bootstrap)
        log = broker.log_path.read_text(errors="replace")
        offline = [line for line in log.splitlines() if " is offline: " in line]
        assert len(offline) == 1 and str(tmpfs) in offline[0] and "ENOSPC" in offline[0], offline
        assert "Traceback" not in log
        assert broker.stop() == 0
        subprocess.run(["mount", "-o", f"remount,size={4 * SMALL_BYTES}", str(tmpfs)], check=True)
        broker.start()
        _check_kept(broker.bootstrap, acked, "tmpfs of 8 MiB")
        _other_serves(broker.bootstrap)
    finally:
        broker.stop()


# -- an injected one --------------------------------------------------------------------------
def test_an_injected_full_log_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    small, big = tmp_path / "small", tmp_path / "big"
    broker = EmbeddedBroker({"log.dirs": f"{big},{small}"}, log_dir=big).start()
    try:
        _create_topics(broker.bootstrap_servers)
        assert (small / f"{FULL}-0").is_dir() and (big / f"{OTHER}-0").is_dir()
        faults = DiskFaults(monkeypatch, small, errno.ENOSPC).arm(budget=2 * 1024 * 1024)
        with caplog.at_level(logging.INFO):
            acked, errors = _fill(broker.bootstrap_servers)
            assert set(errors) == {"KAFKA_STORAGE_ERROR"}, errors
            _kafka_python_is_refused(broker.bootstrap_servers)
            _other_serves(broker.bootstrap_servers)
        ours = [r for r in caplog.records if r.name.startswith("sluice")]
        offline = [r.getMessage() for r in ours if " is offline: " in r.getMessage()]
        assert len(offline) == 1 and str(small) in offline[0] and "ENOSPC" in offline[0]
        assert not [r for r in ours if r.exc_info], "a traceback was logged"
        broker.stop()
        faults.disarm()
        broker.start()
        _check_kept(broker.bootstrap_servers, acked, "injected ENOSPC after 2 MiB")
    finally:
        broker.stop()
