"""Sluice's own producer, consumer and admin client and its CLI tools over TLS, with the
Java client's settings (security.protocol, ssl.truststore.location, ssl.keystore.location,
ssl.key.password, ssl.endpoint.identification.algorithm), and ``sluice certs``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sluice
from sluice.cli import main
from sluice.client import Admin, Consumer, NewTopic, Producer
from sluice.client.errors import ConfigException
from sluice.protocol import ApiKey
from sluice.security import Session
from sluice.security.certificates import DevelopmentPki, write_development_pki

pytestmark = pytest.mark.integration  # brokers, sockets, real clients


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> DevelopmentPki:
    return write_development_pki(tmp_path_factory.mktemp("pki"), clients=["carol"])


@pytest.fixture(scope="module")
def mtls_broker(pki: DevelopmentPki) -> Iterator[sluice.EmbeddedBroker]:
    config = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.location": str(pki.broker),
        "ssl.truststore.location": str(pki.ca),
        "ssl.client.auth": "required",
    }
    with sluice.EmbeddedBroker(config=config) as broker:
        yield broker


def _security(pki: DevelopmentPki) -> dict[str, Any]:
    return {
        "security.protocol": "SSL",
        "ssl.truststore.location": str(pki.ca),
        "ssl.keystore.location": str(pki.clients["carol"]),
        "ssl.endpoint.identification.algorithm": "https",
    }


def test_sluice_clients_produce_consume_and_administer_over_tls(
    mtls_broker: sluice.EmbeddedBroker, pki: DevelopmentPki, topic: str
) -> None:
    assert mtls_broker.broker is not None
    handlers = mtls_broker.broker.handlers
    produce = handlers[ApiKey.PRODUCE]
    seen: list[Session] = []

    def record(ctx: Any, request: Any) -> Any:
        seen.append(ctx.session)
        return produce(ctx, request)

    mtls_broker.call(handlers.__setitem__, ApiKey.PRODUCE, record)
    conf = {"bootstrap.servers": mtls_broker.bootstrap_servers, **_security(pki)}
    try:
        with Admin(conf) as admin:
            admin.create_topics([NewTopic(topic, num_partitions=2)])
            assert topic in admin.list_topics()
        producer = Producer({**conf, "linger.ms": 5})
        values = [f"r{i}".encode() * 100 for i in range(2000)]
        for value in values:
            producer.send(topic, value=value)
        producer.flush()
        producer.close()
    finally:
        mtls_broker.call(handlers.__setitem__, ApiKey.PRODUCE, produce)
    assert {str(s.principal) for s in seen} == {"User:CN=carol"}
    consumer = Consumer({**conf, "group.id": f"{topic}-g", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            got += [r.value for r in consumer.poll(0.5)]
    finally:
        consumer.close()
    assert sorted(got) == sorted(values)


def test_a_bad_security_setting_is_a_config_error(pki: DevelopmentPki) -> None:
    with pytest.raises(ConfigException, match=r"security\.protocol"):
        Producer({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "TLS"})
    with pytest.raises(ConfigException, match=r"cannot read ssl\.truststore\.location"):
        Consumer({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL",
                  "ssl.truststore.location": "/nonexistent/ca.pem"})  # fmt: skip
    with pytest.raises(ConfigException, match=r"ssl\.endpoint\.identification\.algorithm"):
        Admin({"bootstrap.servers": "127.0.0.1:1", **_security(pki),
               "ssl.endpoint.identification.algorithm": "ldap"})  # fmt: skip


def test_cli_tools_take_security_settings_from_a_file(
    mtls_broker: sluice.EmbeddedBroker,
    pki: DevelopmentPki,
    topic: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io
    import sys

    properties = tmp_path / "client.properties"
    properties.write_text("".join(f"{k}={v}\n" for k, v in _security(pki).items()))
    bootstrap = mtls_broker.bootstrap_servers
    common = ("--bootstrap-server", bootstrap)
    assert main(["topics", "--create", "--topic", topic, "--partitions", "1", *common,
                 "--command-config", str(properties)]) == 0  # fmt: skip
    monkeypatch.setattr(sys, "stdin", io.StringIO("one\ntwo\n"))
    assert main(["console-producer", "--topic", topic, *common,
                 "--producer.config", str(properties)]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["console-consumer", "--topic", topic, "--from-beginning", "--max-messages",
                 "2", "--timeout-ms", "15000", *common,
                 "--consumer.config", str(properties)]) == 0  # fmt: skip
    assert capsys.readouterr().out.split() == ["one", "two"]
    # without the settings the tool fails with a message, not a hang
    assert main(["topics", "--list", *common]) != 0


def test_sluice_certs_writes_what_a_broker_and_its_clients_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "pki"
    assert main(["certs", "--dir", str(directory), "--client", "dave",
                 "--key-password", "s3cret"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "ssl.keystore.location=" in out and "principal User:CN=dave" in out
    ca = (directory / "ca.pem").read_bytes()
    # a second run adds a client under the same CA
    assert main(["certs", "--dir", str(directory), "--client", "erin"]) == 0
    assert (directory / "ca.pem").read_bytes() == ca
    config = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.location": str(directory / "broker.pem"),
        "ssl.key.password": "s3cret",
        "ssl.truststore.location": str(directory / "ca.pem"),
        "ssl.client.auth": "required",
    }
    with sluice.EmbeddedBroker(config=config) as broker:
        conf = {
            "bootstrap.servers": broker.bootstrap_servers,
            "security.protocol": "SSL",
            "ssl.truststore.location": str(directory / "ca.pem"),
            "ssl.keystore.location": str(directory / "client-erin.pem"),
        }
        with Admin(conf) as admin:
            assert admin.describe_cluster().brokers
