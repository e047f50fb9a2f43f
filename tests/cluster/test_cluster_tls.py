"""A 3-broker cluster on a real ZooKeeper whose inter-broker listener is SSL with client
certificates required: replica fetches, the controller's requests and controlled
shutdown go over TLS; clients use a PLAINTEXT listener; ZooKeeper registers every
endpoint with its security protocol; acknowledged writes survive killing the leader."""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from sluice.security.certificates import write_development_pki
from sluice.testing import EmbeddedCluster
from support.cluster import partition_metadata
from support.waiting import wait_until

TOPIC = "over-tls"
RECORDS = 300


def _cluster(pki_dir: Path) -> EmbeddedCluster:
    pki = write_development_pki(pki_dir, ["127.0.0.1", "localhost"])
    common = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.location": str(pki.broker),
        "ssl.truststore.location": str(pki.ca),
        "listener.name.internal.ssl.client.auth": "required",
    }
    return EmbeddedCluster(brokers=3, broker_ids=[1, 2, 3], zookeeper=True, overrides=common,
                           listeners=["PLAINTEXT", "INTERNAL"])  # fmt: skip


def _read_all(bootstrap: str, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify",
                         "enable.auto.commit": False, "log_level": 0})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    values: list[bytes] = []
    try:

        def done() -> bool:
            values.extend(m.value() for m in consumer.consume(500, 0.2) if m.error() is None)
            return len(values) >= expected

        wait_until(done, 30, f"{expected} records")
    finally:
        consumer.close()
    return values


def test_replication_over_an_ssl_inter_broker_listener(
    cluster_prerequisites: None, tmp_path: Path
) -> None:
    with _cluster(tmp_path / "pki") as cluster:
        # ZooKeeper holds both endpoints and their protocols, as Kafka registers them
        zk = KazooClient(hosts=cluster.zookeeper_connect)
        zk.start(timeout=15)
        try:
            registered = json.loads(zk.get("/brokers/ids/1")[0])
        finally:
            zk.stop()
            zk.close()
        assert registered["listener_security_protocol_map"] == {
            "PLAINTEXT": "PLAINTEXT", "INTERNAL": "SSL",
        }  # fmt: skip
        assert [e.split("://")[0] for e in registered["endpoints"]] == ["PLAINTEXT", "INTERNAL"]
        assert registered["port"] == cluster.ports[1]  # the PLAINTEXT endpoint, as Kafka

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[
            TOPIC
        ].result(15)
        md = wait_until(
            lambda: (p := partition_metadata(cluster.bootstrap_servers, TOPIC))
            and p.leader >= 0 and len(p.isrs) == 3 and p,
            30, "an ISR of 3, fetching over TLS",
        )  # fmt: skip
        acked: list[bytes] = []
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                             "enable.idempotence": True, "log_level": 0})  # fmt: skip

        def delivered(error: object, message: object) -> None:
            if error is None:
                acked.append(message.value())  # type: ignore[attr-defined]

        for i in range(RECORDS):
            producer.produce(TOPIC, f"r{i}".encode(), on_delivery=delivered)
            if i == RECORDS // 2:
                producer.flush(15)
                cluster.kill_broker(md.leader)  # an election, then fetching from the new leader
        assert producer.flush(60) == 0
        assert len(acked) == RECORDS
        survivors = [b for b in (1, 2, 3) if b != md.leader]
        values = _read_all(cluster.bootstrap_of(survivors[0]), RECORDS)
        assert set(acked) <= set(values)
        cluster.start(md.leader)  # it rejoins the ISR by fetching over TLS
        wait_until(
            lambda: len(partition_metadata(cluster.bootstrap_servers, TOPIC).isrs) == 3,
            60, "the restarted broker back in the ISR",
        )  # fmt: skip
