"""The no-lost-writes test on a secured cluster: three broker processes on ZooKeeper,
each with a SASL_SSL listener for clients and a SASL_SSL inter-broker listener, SCRAM-SHA-512
everywhere, certificates from the development CA (``sluice certs``' module), and the ACL
authorizer with ``allow.everyone.if.no.acl.found=false``.

The brokers' settings are docs/security.md's ("A secured cluster"). Set up as an
operator sets up Kafka in ZooKeeper mode: the users' SCRAM credentials are
written into ZooKeeper with ``sluice configs --zookeeper`` before any broker starts (the
brokers need theirs to reach each other), the brokers' user ``broker`` and the operator
``admin`` are super users, and ``admin`` grants the application's user ``alice`` with
``sluice acls`` exactly what an idempotent producer and the audit's consumer need.

Then the kill -9 cycles of ``test_cluster_no_lost_writes.py`` run with alice's
idempotent acks=all confluent-kafka producer over SASL_SSL, and the audit reads
everything back as alice: nothing acknowledged lost, duplicated or reordered. A client
without TLS, one with a wrong password and an authenticated user without ACLs are
refused (confluent-kafka and kafka-python). 4 cycles by default (the plaintext test
runs 10 of the same kind); ``SLUICE_SECURE_CYCLES`` sets another number
(docs/testing.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from sluice.config import parse_properties
from sluice.security.certificates import write_development_pki
from sluice.testing import EmbeddedCluster
from support.cluster import audit, kill_9_cycles
from support.doc_examples import examples, rewrite
from support.waiting import wait_until

TOPIC = "secure-no-lost-writes"
PARTITIONS = 6
CYCLES = int(os.environ.get("SLUICE_SECURE_CYCLES", "4"))
MECHANISM = "SCRAM-SHA-512"
PASSWORDS = {"broker": "broker-secret", "admin": "admin-secret", "alice": "alice-secret",
             "bob": "bob-secret"}  # fmt: skip
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
AUDIT_GROUP = "chaos-final"  # the group id of the audit's consumers (sluice.testing.chaos)


def _sluice(*argv: str) -> str:
    """Run a ``sluice`` command as an operator would; its output."""
    done = subprocess.run([sys.executable, "-m", "sluice", *argv], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, (argv, done.stdout, done.stderr)
    return done.stdout


def _librdkafka(ca: Path, user: str, password: str | None = None) -> dict[str, object]:
    return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca),
            "sasl.mechanism": MECHANISM, "sasl.username": user,
            "sasl.password": PASSWORDS[user] if password is None else password}  # fmt: skip


@pytest.fixture
def secure_cluster(
    cluster_prerequisites: None, tmp_path: Path
) -> Iterator[tuple[EmbeddedCluster, Path]]:
    pki = write_development_pki(tmp_path / "pki", ["127.0.0.1", "localhost"])
    # the broker settings docs/security.md shows; EmbeddedCluster picks the ports
    documented = examples("security.md")["secure-cluster"].text
    settings = parse_properties(rewrite(documented, {"/path/to/pki": str(pki.ca.parent)}))
    assert settings.pop("listeners").startswith("SASL_SSL://")
    settings.pop("advertised.listeners")
    admin_properties = {
        "security.protocol": "SASL_SSL",
        "ssl.truststore.location": str(pki.ca),
        "sasl.mechanism": MECHANISM,
        "sasl.jaas.config": f'{SCRAM_MODULE} required username="admin" password="admin-secret";',
    }
    cluster = EmbeddedCluster(
        brokers=3, broker_ids=[1, 2, 3], zookeeper=True, overrides=settings,
        listeners=["SASL_SSL", "INTERNAL"], client_config=admin_properties,
    )  # fmt: skip
    try:
        zookeeper = cluster.start_zookeeper()
        for user, password in PASSWORDS.items():  # before any broker: they need theirs
            out = _sluice("configs", "--zookeeper", zookeeper, "--alter", "--entity-type",
                          "users", "--entity-name", user,
                          "--add-config", f"{MECHANISM}=[password={password}]")  # fmt: skip
            assert out.strip() == f"Completed updating config for user {user}."
        described = _sluice("configs", "--zookeeper", zookeeper, "--describe",
                            "--entity-type", "users")  # fmt: skip
        assert f"user-principal 'broker' are {MECHANISM}=iterations=4096" in described
        cluster.start_all()
        yield cluster, pki.ca
    finally:
        cluster.stop()


def _grant_alice(cluster: EmbeddedCluster, directory: Path) -> None:
    admin_file = directory / "admin.properties"
    admin_file.write_text("".join(f"{k}={v}\n" for k, v in cluster.client_config.items()))
    tool = ["acls", "--bootstrap-server", cluster.bootstrap_servers,
            "--command-config", str(admin_file)]  # fmt: skip
    base = [*tool, "--add", "--allow-principal", "User:alice"]
    _sluice(*base, "--operation", "Write", "--operation", "Describe", "--operation", "Read",
            "--topic", TOPIC)  # fmt: skip
    _sluice(*base, "--operation", "IdempotentWrite", "--cluster")
    _sluice(*base, "--operation", "Read", "--group", AUDIT_GROUP)
    listed = _sluice(*tool, "--list", "--principal", "User:alice")
    assert listed.count("User:alice") == 5, listed


def _delivery_errors(config: dict[str, object], count: int = 3) -> list[KafkaError]:
    errors: list[KafkaError] = []
    producer = Producer({**config, "acks": "all", "enable.idempotence": False,
                         "message.timeout.ms": 15000, "log_level": 0})  # fmt: skip
    for i in range(count):
        producer.produce(TOPIC, str(i).encode(), partition=0,
                         on_delivery=lambda err, _msg: errors.append(err))  # fmt: skip
    producer.flush(20)
    return errors


def _refusals(cluster: EmbeddedCluster, ca: Path) -> None:
    bootstrap = cluster.bootstrap_servers
    # no TLS, no SASL: the handshake fails and nothing is served
    plain = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    with pytest.raises(KafkaException):
        plain.list_topics(timeout=3)
    # a wrong password: the broker's authentication error, fatal for the client
    auth_errors: list[KafkaError] = []
    wrong = Producer({"bootstrap.servers": bootstrap, "error_cb": auth_errors.append,
                      "log_level": 0, **_librdkafka(ca, "alice", "not-her-password")})  # fmt: skip
    wrong.produce(TOPIC, b"x")

    def refused() -> bool:
        wrong.poll(0.2)
        return any(e.code() == KafkaError._AUTHENTICATION for e in auth_errors)

    wait_until(refused, 30, "the authentication error")
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in str(auth_errors)
    wrong.purge()
    # authenticated, but bob has no ACL: refused by the authorizer
    errors = _delivery_errors({"bootstrap.servers": bootstrap, **_librdkafka(ca, "bob")})
    assert [e.code() if e else None for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    # alice may write and read her topic, not delete it nor create others
    alice_admin = AdminClient({"bootstrap.servers": bootstrap, **_librdkafka(ca, "alice")})
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        alice_admin.delete_topics([TOPIC])[TOPIC].result(15)
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        alice_admin.create_topics([NewTopic("not-hers", 1, 3)])["not-hers"].result(15)


def _kafka_python(cluster: EmbeddedCluster, ca: Path) -> None:
    """kafka-python over SASL_SSL / SCRAM-SHA-512: alice reads her topic, bob may not
    write to it."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import TopicAuthorizationFailedError

    security = dict(
        bootstrap_servers=cluster.bootstrap_servers, security_protocol="SASL_SSL",
        ssl_cafile=str(ca), sasl_mechanism=MECHANISM,
    )  # fmt: skip
    alice = KafkaConsumer(**security, sasl_plain_username="alice",
                          sasl_plain_password=PASSWORDS["alice"])  # fmt: skip
    try:
        alice.assign([TopicPartition(TOPIC, 0)])
        alice.seek_to_beginning()
        records = wait_until(lambda: alice.poll(1000, max_records=50), 30, "alice's records")
        assert sum(len(batch) for batch in records.values()) > 0
    finally:
        alice.close()
    bob = KafkaProducer(**security, sasl_plain_username="bob", sasl_plain_password=PASSWORDS["bob"],
                        max_block_ms=5000, retries=0)  # fmt: skip
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            bob.send(TOPIC, b"not bob's").get(15)
    finally:
        bob.close(timeout=5)


def test_no_acknowledged_write_is_lost_on_a_sasl_ssl_cluster_with_acls(
    secure_cluster: tuple[EmbeddedCluster, Path], tmp_path: Path
) -> None:
    cluster, ca = secure_cluster
    admin = AdminClient(
        {"bootstrap.servers": cluster.bootstrap_servers, **_librdkafka(ca, "admin")}
    )
    configs = {"min.insync.replicas": "2"}
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config=configs)])[TOPIC].result(30)
    _grant_alice(cluster, tmp_path)
    _refusals(cluster, ca)

    history, killed = kill_9_cycles(
        cluster, TOPIC, PARTITIONS, CYCLES,
        producer_config=_librdkafka(ca, "alice"), admin_config=_librdkafka(ca, "admin"),
    )  # fmt: skip
    result = audit(history, cluster.bootstrap_servers, TOPIC, PARTITIONS, _librdkafka(ca, "alice"))
    print(
        f"\nsecure no-lost-writes: killed {', '.join(killed)}; sent {len(history.sent)}, "
        f"acknowledged {result.acked}, failed {len(history.failures)}, lost "
        f"{result.count('lost')}, duplicated {result.count('duplicated')}, reordered "
        f"{result.count('reordered')}"
    )
    assert result.ok, result.anomalies[:10]
    assert result.acked > 0
    _kafka_python(cluster, ca)
