"""Client quotas on a 3-broker cluster with a real ZooKeeper: a quota set through one
broker is written where Kafka's ZooKeeper mode writes it (``/config/clients/<id>``,
``/config/users/<user>/clients/<id>``, a ``/config/changes`` notification) and another
broker throttles by it moments later."""

from __future__ import annotations

import json
import time

import confluent_kafka
from kazoo.client import KazooClient

from sluice.client import Admin, NewTopic
from sluice.testing import EmbeddedCluster
from support.waiting import wait_until


def test_a_quota_set_through_one_broker_throttles_on_another(cluster3: EmbeddedCluster) -> None:
    with Admin({"bootstrap.servers": cluster3.bootstrap_of(1)}) as admin:
        # the partition on broker 3, which is asked nothing about quotas directly
        admin.create_topics([NewTopic("capped", replica_assignment={0: [3]})])
        set_at = time.monotonic()
        admin.alter_client_quotas([
            ({"client-id": "capped-client"}, {"producer_byte_rate": 1000.0}),
            ({"user": "ANONYMOUS", "client-id": None}, {"request_percentage": 200.0}),
        ])  # fmt: skip

    zk = KazooClient(hosts=cluster3.zookeeper_connect)
    zk.start(timeout=15)
    try:
        data, _ = zk.get("/config/clients/capped-client")
        assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1000"}}
        data, _ = zk.get("/config/users/ANONYMOUS/clients/<default>")
        assert json.loads(data) == {"version": 1, "config": {"request_percentage": "200.0"}}
        changes = [
            json.loads(zk.get(f"/config/changes/{child}")[0])
            for child in zk.get_children("/config/changes")
        ]
        assert {"version": 2, "entity_path": "clients/capped-client"} in changes
        assert {"version": 2, "entity_path": "users/ANONYMOUS/clients/<default>"} in changes
    finally:
        zk.stop()
        zk.close()

    with Admin({"bootstrap.servers": cluster3.bootstrap_of(3)}) as admin:
        assert ({"client-id": "capped-client"}, {"producer_byte_rate": 1000.0}) in (
            admin.describe_client_quotas([("client-id", 2, None)], strict=True)
        )

    throttles: list[float] = []
    producer = confluent_kafka.Producer({
        "bootstrap.servers": cluster3.bootstrap_of(3), "client.id": "capped-client",
        "throttle_cb": lambda event: throttles.append(event.throttle_time),
    })  # fmt: skip

    def throttled() -> bool:
        # 50 kB against 1000 B/s: more than ten windows' worth at once
        producer.produce("capped", b"x" * 50_000, partition=0)
        producer.flush(15)
        producer.poll(0.1)
        return bool(throttles)

    wait_until(throttled, 30, "a throttle from broker 3")
    elapsed = time.monotonic() - set_at
    print(f"quota set on broker 1, throttled by broker 3 after {elapsed:.2f} s")
    assert max(throttles) > 1.0  # seconds: (50 kB / 10 s - 1000) / 1000 * 10 s
