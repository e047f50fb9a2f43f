"""Consumer-group benchmark: rebalance time after a member joins, and offset-commit rate.

For groups of 3, 10 and 50 confluent-kafka consumers (subscribe(), range assignor)
it prints how long the group takes to be stable again, with every partition owned
by exactly one member, after one more member joins; and synchronous offset commits
per second from one member. Sluice runs with group.initial.rebalance.delay.ms=0;
Tansu beside it in the same run, with the same client settings. Figures only.

    python bench/groups.py [--sizes 3,10,50] [--repeat 3] [--brokers sluice,tansu]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
import brokers

# The same for every broker: Tansu holds a rejoin for half of max.poll.interval.ms.
GROUP_SETTINGS = {"session.timeout.ms": 6000, "max.poll.interval.ms": 10000}
WAIT_S = 120


class Member:
    """One consumer and the partitions it owns right now."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.owned: set[int] = set()
        self.assignments = 0
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
             "log.connection.close": False, **GROUP_SETTINGS}
        )  # fmt: skip
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self.owned = {p.partition for p in partitions}
        self.assignments += 1

    def _revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self.owned = set()

    def poll(self) -> None:
        self.consumer.poll(0)

    def close(self) -> None:
        self.consumer.close()


def stable(members: list[Member], partitions: int, after: list[int]) -> bool:
    """Every member has been assigned since ``after`` and the partitions are split exactly."""
    if any(m.assignments <= a for m, a in zip(members, after, strict=True)):
        return False
    owned = [p for m in members for p in m.owned]
    return len(owned) == partitions and len(set(owned)) == partitions


def wait_stable(members: list[Member], partitions: int, after: list[int]) -> float:
    start = time.perf_counter()
    while not stable(members, partitions, after):
        if time.perf_counter() - start > WAIT_S:
            raise TimeoutError(f"group of {len(members)} not stable after {WAIT_S}s")
        for m in members:
            m.poll()
        time.sleep(0.002)
    return time.perf_counter() - start


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def rebalance_time(bootstrap: str, size: int) -> float:
    """Seconds for a stable group of ``size`` to be stable again after one more joins."""
    topic, group = f"g-{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
    partitions = 2 * (size + 1)
    create_topic(bootstrap, topic, partitions)
    members = [Member(bootstrap, group, topic) for _ in range(size)]
    try:
        wait_stable(members, partitions, [0] * size)
        before = [m.assignments for m in members] + [0]
        members.append(Member(bootstrap, group, topic))
        return wait_stable(members, partitions, before)
    finally:
        for m in members:
            m.close()


def commit_rate(bootstrap: str, seconds: float = 3.0) -> float:
    """Synchronous OffsetCommits per second from one consumer of a stable group."""
    topic, group = f"c-{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    member = Member(bootstrap, group, topic)
    try:
        wait_stable([member], 1, [0])
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            member.consumer.commit(offsets=[TopicPartition(topic, 0, count)], asynchronous=False)
            count += 1
        return count / (time.perf_counter() - start)
    finally:
        member.close()


def measure(name: str, launcher: Callable[[], AbstractContextManager[Any]], sizes: list[int],
            repeat: int) -> dict[str, float | str]:  # fmt: skip
    out: dict[str, float | str] = {}
    try:
        with launcher() as (bootstrap, _proc):
            for size in sizes:
                runs = []
                for _ in range(repeat if size < 50 else 1):
                    try:
                        runs.append(rebalance_time(bootstrap, size))
                    except Exception as exc:  # a broker may not support it: say so
                        out[f"rebalance {size}"] = f"error: {exc}"
                        break
                else:
                    out[f"rebalance {size}"] = statistics.median(runs)
                print(f"  {name}: group of {size}: {out[f'rebalance {size}']}", flush=True)
            try:
                out["commits/s"] = statistics.median(commit_rate(bootstrap) for _ in range(repeat))
            except Exception as exc:
                out["commits/s"] = f"error: {exc}"
    except brokers.BrokerStartError as exc:
        out["error"] = str(exc)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="3,10,50")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--brokers", default="sluice,tansu")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    launchers = {
        "sluice": lambda: brokers.sluice(overrides={"group.initial.rebalance.delay.ms": "0"}),
        "tansu": brokers.tansu,
    }
    results = {}
    for name in args.brokers.split(","):
        print(f"measuring {name} ...", flush=True)
        results[name] = measure(name, launchers[name], sizes, args.repeat)
    print(f"\nconsumer groups ({GROUP_SETTINGS}; medians; seconds to stable after a join)")
    names = list(results)
    print(f"{'metric':<16}" + "".join(f"{n:>14}" for n in names) + "  sluice/tansu")
    for key in [f"rebalance {s}" for s in sizes] + ["commits/s"]:
        values = [results[n].get(key, "n/a") for n in names]
        cells = "".join(f"{v:>14.3f}" if isinstance(v, float) else f"{str(v)[:13]:>14}"
                        for v in values)  # fmt: skip
        s, t = results.get("sluice", {}).get(key), results.get("tansu", {}).get(key)
        ratio = f"{s / t:.2f}" if isinstance(s, float) and isinstance(t, float) and t else "-"
        print(f"{key:<16}{cells}  {ratio}")
    for name, res in results.items():
        for key, value in res.items():
            if isinstance(value, str):
                print(f"{name} {key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
