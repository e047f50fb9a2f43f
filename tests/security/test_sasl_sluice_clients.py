"""Sluice's own producer, consumer and admin client over SASL (PLAIN, SCRAM-SHA-256/512,
OAUTHBEARER with an unsecured token) with the Java client's settings, their
authentication errors, and ``sluice configs`` managing SCRAM users through a SASL
listener (``--command-config``); each user it makes is then used by confluent-kafka and
kafka-python."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import kafka
import pytest
from confluent_kafka import Producer as ConfluentProducer

import sluice
from sluice.cli import main
from sluice.client import Admin, Consumer, Producer
from sluice.client.errors import SaslAuthenticationException, UnsupportedSaslMechanismException
from support.sasl import OAUTH_MODULE, PLAIN_MODULE, SCRAM_MODULE, plain_jaas

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(USERS),
        "connection.failed.authentication.delay.ms": "20",
    }


def client_config(broker: sluice.EmbeddedBroker, mechanism: str, jaas: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism, "sasl.jaas.config": jaas,
    }  # fmt: skip


def admin_properties(tmp_path: Path, broker: sluice.EmbeddedBroker) -> str:
    path = tmp_path / "admin.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        f'sasl.jaas.config={PLAIN_MODULE} required username="admin" password="admin-secret";\n'
    )
    return str(path)


def round_trip(config: dict[str, Any], topic: str) -> None:
    with Producer(config) as producer:
        producer.send(topic, b"hello").get(timeout=15)
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        values: list[bytes] = []
        while not values and time.monotonic() < deadline:
            values = [r.value for r in consumer.poll(500)]
        assert values == [b"hello"]
    finally:
        consumer.close()


def test_sluice_clients_with_plain_and_oauthbearer(broker: sluice.EmbeddedBroker) -> None:
    round_trip(
        client_config(broker, "PLAIN", f'{PLAIN_MODULE} required username="alice" '
                                       'password="alice-secret";'),
        "sluice-plain",
    )  # fmt: skip
    round_trip(
        client_config(broker, "OAUTHBEARER", f"{OAUTH_MODULE} required "
                                             "unsecuredLoginStringClaim_sub=alice;"),
        "sluice-oauth",
    )  # fmt: skip
    # librdkafka's names work too
    config = {
        "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret",
    }  # fmt: skip
    with Admin(config) as admin:
        assert admin.describe_cluster().brokers


def test_sluice_clients_report_authentication_errors(broker: sluice.EmbeddedBroker) -> None:
    wrong = client_config(
        broker, "PLAIN", f'{PLAIN_MODULE} required username="alice" password="nope";'
    )
    started = time.monotonic()
    producer = Producer({**wrong, "max.block.ms": 20_000})
    try:
        with pytest.raises(SaslAuthenticationException, match="Invalid username or password"):
            producer.send("sluice-wrong", b"x").get(timeout=20)
    finally:
        producer.close()
    assert time.monotonic() - started < 10  # fatal at once, not retried until max.block.ms
    with pytest.raises(SaslAuthenticationException, match="Invalid username or password"):
        Admin(wrong).describe_cluster()
    unknown = {
        **wrong, "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": f'{SCRAM_MODULE} required username="x" password="y";',
    }  # fmt: skip
    with pytest.raises(SaslAuthenticationException, match="invalid credentials"):
        Admin(unknown).describe_cluster()


def test_sluice_configs_manages_scram_users(
    broker: sluice.EmbeddedBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["configs", "--bootstrap-server", broker.bootstrap_servers,
            "--command-config", admin_properties(tmp_path, broker)]  # fmt: skip
    add = "SCRAM-SHA-256=[iterations=8192,password=bob-secret],SCRAM-SHA-512=[password=bob-512]"
    assert main([*base, "--alter", "--entity-type", "users", "--entity-name", "bob",
                 "--add-config", add]) == 0  # fmt: skip
    assert capsys.readouterr().out.strip() == "Completed updating config for user bob."
    assert main([*base, "--describe", "--entity-type", "users", "--entity-name", "bob"]) == 0
    assert capsys.readouterr().out.strip() == (
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096"
    )
    # the new user, with Sluice's, confluent-kafka's and kafka-python's clients
    round_trip(
        client_config(broker, "SCRAM-SHA-256",
                      f'{SCRAM_MODULE} required username="bob" password="bob-secret";'),
        "sluice-scram",
    )  # fmt: skip
    confluent = ConfluentProducer({
        "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": "bob-512",
    })  # fmt: skip
    confluent.produce("sluice-scram", b"confluent")
    assert confluent.flush(15) == 0
    producer = kafka.KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="bob",
        sasl_plain_password="bob-secret",
    )  # fmt: skip
    producer.send("sluice-scram", b"kafka-python").get(timeout=15)
    producer.close()
    assert main([*base, "--alter", "--entity-type", "users", "--entity-name", "bob",
                 "--delete-config", "SCRAM-SHA-512"]) == 0  # fmt: skip
    capsys.readouterr()
    with pytest.raises(SaslAuthenticationException):
        Admin(client_config(broker, "SCRAM-SHA-512",
                            f'{SCRAM_MODULE} required username="bob" password="bob-512";'),
              ).describe_cluster()  # fmt: skip
    # every tool takes the same --command-config
    properties = admin_properties(tmp_path, broker)
    topics = ["topics", "--bootstrap-server", broker.bootstrap_servers]
    assert main([*topics, "--command-config", properties, "--list"]) == 0
    assert "sluice-scram" in capsys.readouterr().out.split()
    # errors are one line
    assert main([*base, "--alter", "--entity-type", "users", "--entity-name", "carol",
                 "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]"]) == 1  # fmt: skip
    assert "Too few iterations" in capsys.readouterr().err
    assert main([*base, "--alter", "--entity-type", "users", "--entity-name", "carol",
                 "--delete-config", "SCRAM-SHA-256"]) == 1  # fmt: skip
    assert "does not exist" in capsys.readouterr().err


def test_an_unsupported_mechanism_is_named() -> None:
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(USERS),
    }  # fmt: skip
    with sluice.EmbeddedBroker(config=config) as plain_only:
        scram = client_config(
            plain_only, "SCRAM-SHA-256", f'{SCRAM_MODULE} required username="a" password="b";'
        )
        with pytest.raises(UnsupportedSaslMechanismException, match=r"\['PLAIN'\]"):
            Admin(scram).describe_cluster()
