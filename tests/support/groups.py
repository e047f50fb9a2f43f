"""Real clients in consumer groups: a confluent-kafka consumer on its own thread
that commits every record synchronously, a consumer in a subprocess that can be killed,
and checks of the coordinator's view of a group (no fixed sleeps: conditions with
deadlines)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient

FAST_GROUP = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 300,
    "topic.metadata.refresh.interval.ms": 1000,
}


def describe(bootstrap: str, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(10)


def coordinator_view(bootstrap: str, group: str) -> tuple[str, dict[str, set[int]]]:
    """(state, member id -> assigned partitions) as DescribeGroups reports them."""
    d = describe(bootstrap, group)
    members = {
        m.member_id: {tp.partition for tp in (m.assignment.topic_partitions or [])}
        for m in d.members
    }
    return d.state.name, members


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    """The group's committed offsets, read by a consumer that does not join the group."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([CTP(topic, p) for p in range(partitions)], timeout=10)
        return [tp.offset for tp in tps]
    finally:
        consumer.close()


def assert_spread(assignments: list[set[int]], partitions: int) -> None:
    """Every partition owned by exactly one member, spread evenly."""
    owned = [p for a in assignments for p in a]
    assert sorted(owned) == list(range(partitions)), assignments
    sizes = [len(a) for a in assignments]
    assert max(sizes) - min(sizes) <= 1, assignments


class ConsumerThread:
    """A confluent-kafka group consumer polling on its own thread. Each record counts
    as read once its offset is committed synchronously. A refused commit (for example
    REBALANCE_IN_PROGRESS) is retried while the partition stays owned (cooperative
    rebalances keep it); once the partition is revoked the new owner delivers the
    record again."""

    def __init__(self, bootstrap: str, group: str, topic: str, **conf: Any) -> None:
        self.records: list[bytes] = []
        self.owned: set[int] = set()
        self.rebalances = 0
        self.errors: list[str] = []
        self._uncommitted: dict[int, list[Any]] = {}  # partition -> read, not committed
        self._stop = threading.Event()
        self._close_leaves = True
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **FAST_GROUP,
                **conf,
            }
        )
        self.consumer.subscribe(
            [topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_revoke
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_assign(self, _consumer: Any, partitions: list[CTP]) -> None:
        self.rebalances += 1
        # Rebound, never changed in place: other threads iterate what they read.
        self.owned = self.owned | {tp.partition for tp in partitions}

    def _on_revoke(self, _consumer: Any, partitions: list[CTP]) -> None:
        self.rebalances += 1
        self.owned = self.owned - {tp.partition for tp in partitions}
        for tp in partitions:  # the next owner reads them again
            self._uncommitted.pop(tp.partition, None)

    def start(self) -> ConsumerThread:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            for partition, read in list(self._uncommitted.items()):
                if read and partition in self.owned:
                    self._commit(read.pop())  # the latest covers the earlier ones
            msg = self.consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error() is not None:
                self.errors.append(str(msg.error()))
                continue
            self._commit(msg)
        self.consumer.close()

    def _commit(self, msg: Any) -> None:
        read = self._uncommitted.setdefault(msg.partition(), [])
        read.append(msg)
        try:
            result = self.consumer.commit(message=msg, asynchronous=False)
        except KafkaException as exc:
            self.errors.append(f"commit: {exc}")
            return
        if result and all(tp.error is None for tp in result):
            self.records.extend(m.value() for m in read)
            read.clear()

    def stop(self) -> None:
        """Close cleanly (revoke, LeaveGroup) from the polling thread."""
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive()


_CHILD = r"""
import json, sys
from confluent_kafka import Consumer
conf = json.loads(sys.argv[1]); topic = sys.argv[2]
owned = set()
def report():
    print(json.dumps({"owned": sorted(owned)}), flush=True)
def on_assign(c, ps):
    owned.update(tp.partition for tp in ps); report()
def on_revoke(c, ps):
    owned.difference_update(tp.partition for tp in ps); report()
c = Consumer(conf)
c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
while True:
    m = c.poll(0.1)
    if m is None or m.error() is not None:
        continue
    try:
        result = c.commit(message=m, asynchronous=False)
    except Exception:
        continue
    if result and all(tp.error is None for tp in result):
        print(json.dumps({"record": m.value().decode()}), flush=True)
"""


class ConsumerProcess:
    """The same consumer in a child process, reporting on stdout; ``kill()`` is SIGKILL."""

    def __init__(self, bootstrap: str, group: str, topic: str, **conf: Any) -> None:
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **FAST_GROUP,
            **conf,
        }
        self.records: list[bytes] = []
        self.owned: set[int] = set()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, json.dumps(config), topic],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            if "record" in event:
                self.records.append(event["record"].encode())
            else:
                self.owned = set(event["owned"])

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)
        self._reader.join(30)
