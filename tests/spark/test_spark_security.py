"""The ``sluice`` source over SASL_SSL, and the identity its consumers show the broker:
``kafka.security.protocol``, ``kafka.ssl.*`` and ``kafka.sasl.*`` reach the driver's and
the tasks' consumers; the broker sees the SASL user as the principal (what ACLs and user
quotas key on) and ``consumer-<group id>`` as the client id (what client-id quotas key
on), with the group id from ``groupIdPrefix`` or ``kafka.group.id``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

import sluice
from sluice.client import Admin, NewTopic, Producer
from sluice.protocol import ApiKey
from sluice.security.certificates import DevelopmentPki, write_development_pki
from support.sasl import PLAIN_MODULE, plain_jaas

pytestmark = pytest.mark.timeout(240)

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> DevelopmentPki:
    return write_development_pki(tmp_path_factory.mktemp("pki"), key_password="keypass")


@pytest.fixture(scope="module")
def broker_config(pki: DevelopmentPki) -> dict[str, Any]:
    return {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(USERS, "admin"),
        "ssl.keystore.location": str(pki.broker),
        "ssl.key.password": "keypass",
        "ssl.truststore.location": str(pki.ca),
    }


def _client(broker: sluice.EmbeddedBroker, pki: DevelopmentPki, password: str) -> dict[str, str]:
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "ssl.truststore.location": str(pki.ca),
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN_MODULE} required username="alice" password="{password}";',
    }


@pytest.fixture
def seen(broker: sluice.EmbeddedBroker) -> Iterator[list[tuple[int, str, str]]]:
    """(API key, principal, client id) of every Fetch and ListOffsets the broker handles."""
    assert broker.broker is not None
    handlers = broker.broker.handlers
    originals = {key: handlers[key] for key in (ApiKey.FETCH, ApiKey.LIST_OFFSETS)}
    out: list[tuple[int, str, str]] = []

    def wrap(key: int, handler: Any) -> Any:
        def record(ctx: Any, request: Any) -> Any:
            out.append((key, ctx.principal.name, ctx.client_id))
            return handler(ctx, request)

        return record

    for key, handler in originals.items():
        broker.call(handlers.__setitem__, key, wrap(key, handler))
    yield out
    for key, handler in originals.items():
        broker.call(handlers.__setitem__, key, handler)


def _read(spark: Any, config: dict[str, str], topic: str, **options: str) -> Any:
    reader = spark.read.format("sluice").option("subscribe", topic)
    for key, value in {**{f"kafka.{k}": v for k, v in config.items()}, **options}.items():
        reader = reader.option(key, value)
    return reader.load()


def test_read_over_sasl_ssl_with_the_consumers_identity(
    spark: Any,
    broker: sluice.EmbeddedBroker,
    pki: DevelopmentPki,
    topic: str,
    seen: list[tuple[int, str, str]],
) -> None:
    config = _client(broker, pki, "alice-secret")
    with Admin(config) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
    with Producer(config) as producer:
        for i in range(6):
            producer.send(topic, f"v{i}".encode(), partition=i % 2)
        producer.flush(30)

    rows = _read(spark, config, topic, groupIdPrefix="etl").collect()
    assert sorted(r.value for r in rows) == [f"v{i}".encode() for i in range(6)]
    assert {principal for _, principal, _ in seen} == {"alice"}
    fetches = {client for key, _, client in seen if key == ApiKey.FETCH}
    assert len(fetches) == 1
    (executor,) = fetches
    found = re.fullmatch(r"consumer-(etl-[0-9a-f-]{36})-executor", executor)
    assert found is not None, executor
    listed = {client for key, _, client in seen if key == ApiKey.LIST_OFFSETS}
    assert f"consumer-{found.group(1)}-driver" in listed

    seen.clear()
    assert _read(spark, config, topic, **{"kafka.group.id": "analytics"}).count() == 6
    assert {(principal, client) for _, principal, client in seen} == {
        ("alice", "consumer-analytics")
    }

    wrong = _client(broker, pki, "wrong")
    with pytest.raises(Exception, match=r"(?i)authentication failed"):
        _read(spark, wrong, topic).collect()
