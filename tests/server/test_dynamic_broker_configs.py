"""Dynamic broker configs on one broker (sluice.server.dynamic_broker_config): set per
broker and as the cluster default with confluent-kafka's and kafka-python's admin
clients, reported with Kafka's sources and precedence, refused for keys that cannot change
while the broker runs, kept across a restart, and taking effect at once — retention of a
topic without its own override, and the per-address connection limit."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType

import sluice
from sluice.cli import main
from support.waiting import wait_until

TIMEOUT_S = 15.0
SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[sluice.EmbeddedBroker]:
    config = {"log.retention.check.interval.ms": 100, "log.segment.delete.delay.ms": 0}
    with sluice.EmbeddedBroker(config=config, log_dir=tmp_path) as broker:
        yield broker


def alter(admin: AdminClient, name: str, *ops: tuple[str, str | None, AlterConfigOpType]) -> None:
    """IncrementalAlterConfigs: confluent-kafka's for one broker, ``sluice configs`` for
    the cluster default (confluent-kafka and kafka-python refuse a BROKER resource with
    an empty name)."""
    if not name:
        add = ",".join(f"{k}={v}" for k, v, op in ops if op == SET)
        delete = ",".join(k for k, _, op in ops if op == DELETE)
        argv = ["--alter", "--broker-defaults"]
        argv += ["--add-config", add] if add else []
        argv += ["--delete-config", delete] if delete else []
        assert sluice_configs(admin.bootstrap_servers, *argv) == 0
        return
    entries = [ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops]
    resource = ConfigResource("broker", name, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT_S)


def sluice_configs(bootstrap: str, *argv: str) -> int:
    return main(["configs", "--bootstrap-server", bootstrap, *argv])


def alter_error(admin: AdminClient, name: str, key: str, value: str) -> KafkaError:
    with pytest.raises(KafkaException) as caught:
        alter(admin, name, (key, value, SET))
    error: KafkaError = caught.value.args[0]
    return error


def describe(admin: AdminClient, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource("broker", name)
    result: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(
        timeout=TIMEOUT_S
    )
    return result


def test_layers_sources_and_precedence(
    embedded: sluice.EmbeddedBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = AdminClient({"bootstrap.servers": embedded.bootstrap_servers})
    admin.bootstrap_servers = embedded.bootstrap_servers
    alter(admin, "", ("log.retention.ms", "7200000", SET))
    entry = describe(admin, "0")["log.retention.ms"]
    assert entry.value == "7200000" and not entry.is_read_only
    assert ConfigSource(entry.source) is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    alter(admin, "0", ("log.retention.ms", "3600000", SET))
    entry = describe(admin, "0")["log.retention.ms"]
    assert entry.value == "3600000"
    assert ConfigSource(entry.source) is ConfigSource.DYNAMIC_BROKER_CONFIG
    capsys.readouterr()
    assert sluice_configs(embedded.bootstrap_servers, "--describe", "--entity-type", "brokers") == 0
    assert capsys.readouterr().out.splitlines() == [
        "Dynamic configs for broker 0 are:",
        "  log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
        "log.retention.ms=3600000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000, "
        "DEFAULT_CONFIG:log.retention.hours=168}",
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
        "log.retention.ms=7200000}",
    ]
    # a topic without its own override inherits it, reported as the broker's
    admin.create_topics([NewTopic("inherits", 1, 1)])["inherits"].result(timeout=TIMEOUT_S)
    topic = ConfigResource("topic", "inherits")
    retention = admin.describe_configs([topic])[topic].result(timeout=TIMEOUT_S)["retention.ms"]
    assert retention.value == "3600000"
    assert ConfigSource(retention.source) is ConfigSource.DYNAMIC_BROKER_CONFIG
    alter(admin, "0", ("log.retention.ms", None, DELETE))
    assert describe(admin, "0")["log.retention.ms"].value == "7200000"

    error = alter_error(admin, "0", "broker.id", "7")
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: Set(broker.id)" in error.str()
    error = alter_error(admin, "0", "log.segment.bytes", "ten")
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "Invalid config value for resource" in error.str()
    error = alter_error(admin, "0", "max.connections.per.ip", "0")  # 0 needs overrides
    assert error.code() == KafkaError.INVALID_REQUEST
    assert describe(admin, "0")["log.segment.bytes"].value == "1073741824"
    entries = [ConfigEntry("log.segment.bytes", "4096", incremental_operation=SET)]
    resource = ConfigResource("broker", "0", incremental_configs=entries)
    admin.incremental_alter_configs([resource], validate_only=True)[resource].result(TIMEOUT_S)
    assert describe(admin, "0")["log.segment.bytes"].value == "1073741824"  # only checked
    alter(admin, "0", ("log.cleanup.policy", "compact", AlterConfigOpType.APPEND))
    assert describe(admin, "0")["log.cleanup.policy"].value == "delete,compact"
    alter(admin, "0", ("log.cleanup.policy", "delete", AlterConfigOpType.SUBTRACT))
    assert describe(admin, "0")["log.cleanup.policy"].value == "compact"
    alter(admin, "0", ("log.cleanup.policy", None, DELETE))

    # kept across a restart, read back with kafka-python
    embedded.stop()
    restarted = sluice.EmbeddedBroker(config={}, log_dir=embedded.log_dir).start()
    try:
        kadmin = KafkaAdminClient(bootstrap_servers=restarted.bootstrap_servers)
        try:
            resource = KConfigResource(ConfigResourceType.BROKER, "0")
            configs = kadmin.describe_configs([resource], config_filter="all")["broker"]["0"]
            assert configs["log.retention.ms"]["value"] == "7200000"
        finally:
            kadmin.close()
    finally:
        restarted.stop()


def test_retention_shortened_deletes_old_segments(embedded: sluice.EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": embedded.bootstrap_servers})
    admin.bootstrap_servers = embedded.bootstrap_servers
    admin.create_topics([NewTopic("aging", 1, 1)])["aging"].result(timeout=TIMEOUT_S)
    alter(admin, "", ("log.segment.bytes", "2000", SET))  # small segments for this topic too
    producer = Producer({"bootstrap.servers": embedded.bootstrap_servers, "linger.ms": 0})
    for i in range(40):
        producer.produce("aging", b"v" * 200, key=b"%d" % i)
        producer.flush(TIMEOUT_S)

    def earliest() -> int:
        low, _ = consumer_offsets(embedded, "aging")
        return low

    assert earliest() == 0
    kadmin = KafkaAdminClient(bootstrap_servers=embedded.bootstrap_servers)
    try:  # AlterConfigs: the broker's dynamic configs become exactly these
        resource = KConfigResource(ConfigResourceType.BROKER, "0",
                                   configs={"log.retention.ms": "1"})  # fmt: skip
        kadmin.alter_configs([resource], incremental=False)
    finally:
        kadmin.close()
    assert wait_until(lambda: earliest() > 0, TIMEOUT_S, "old segments deleted")


def consumer_offsets(embedded: sluice.EmbeddedBroker, topic: str) -> tuple[int, int]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": embedded.bootstrap_servers, "group.id": "wm"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
        return int(low), int(high)
    finally:
        consumer.close()


def _api_versions_answered(port: int) -> bool:
    """Whether a new connection gets an answer to ApiVersions v0 (False: closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        request = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
        try:
            sock.sendall(struct.pack(">i", len(request)) + request)
            return len(sock.recv(4)) == 4
        except (ConnectionResetError, BrokenPipeError):
            return False


def test_connection_limit_lowered_refuses_a_new_connection(
    embedded: sluice.EmbeddedBroker,
) -> None:
    admin = AdminClient({"bootstrap.servers": embedded.bootstrap_servers})
    admin.bootstrap_servers = embedded.bootstrap_servers
    assert _api_versions_answered(embedded.port)
    alter(admin, "0", ("max.connections.per.ip", "1", SET))  # the admin's connection is one
    assert wait_until(lambda: not _api_versions_answered(embedded.port), TIMEOUT_S,
                      "a new connection refused")  # fmt: skip
    alter(admin, "0", ("max.connections.per.ip", None, DELETE))
    assert _api_versions_answered(embedded.port)


def test_max_connections_lowered_holds_a_new_connection_until_raised(
    embedded: sluice.EmbeddedBroker,
) -> None:
    admin = AdminClient({"bootstrap.servers": embedded.bootstrap_servers})
    alter(admin, "0", ("log.cleaner.backoff.ms", "15000", SET))  # the admin is connected
    quotas = embedded._started().connection_quotas
    assert quotas is not None
    alter(admin, "0", ("max.connections", str(quotas.total), SET))
    with socket.create_connection(("127.0.0.1", embedded.port), timeout=TIMEOUT_S) as sock:
        request = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
        sock.sendall(struct.pack(">i", len(request)) + request)  # waits in the backlog
        sock.settimeout(1.0)
        with pytest.raises(TimeoutError):
            sock.recv(4)
        alter(admin, "0", ("max.connections", None, DELETE))  # accepted now: answered
        sock.settimeout(TIMEOUT_S)
        assert len(sock.recv(4)) == 4
