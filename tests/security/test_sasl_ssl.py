"""SASL_SSL: SASL over TLS with confluent-kafka, kafka-python, aiokafka and Sluice's own
clients (PLAIN and SCRAM-SHA-512); the principal is the SASL user, not the TLS peer; a
wrong password fails over TLS as over plaintext. The broker's inter-broker listener is
SASL_SSL (its own client settings are checked at start)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import aiokafka
import pytest
from aiokafka.helpers import create_ssl_context
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer

import sluice
from sluice.client import Admin
from sluice.client import Producer as SluiceProducer
from sluice.client.errors import SaslAuthenticationException
from sluice.protocol import ApiKey
from sluice.security import KafkaPrincipal
from sluice.security.certificates import DevelopmentPki, write_development_pki
from support.sasl import PLAIN_MODULE, plain_jaas

pytestmark = pytest.mark.integration

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> DevelopmentPki:
    return write_development_pki(tmp_path_factory.mktemp("pki"), key_password="keypass")


@pytest.fixture(scope="module")
def sasl_ssl(pki: DevelopmentPki) -> Iterator[sluice.EmbeddedBroker]:
    config = {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(USERS, "admin"),
        "ssl.keystore.location": str(pki.broker),
        "ssl.key.password": "keypass",
        "ssl.truststore.location": str(pki.ca),
    }
    with sluice.EmbeddedBroker(config=config) as broker:
        yield broker


def _ssl(pki: DevelopmentPki) -> dict[str, Any]:
    return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca)}


def test_sasl_ssl_with_every_client(sasl_ssl: sluice.EmbeddedBroker, pki: DevelopmentPki) -> None:
    address = sasl_ssl.bootstrap_servers
    assert sasl_ssl.broker is not None
    handlers = sasl_ssl.broker.handlers
    produce = handlers[ApiKey.PRODUCE]
    seen: list[KafkaPrincipal] = []

    def record(ctx: Any, request: Any) -> Any:
        seen.append(ctx.principal)
        return produce(ctx, request)

    sasl_ssl.call(handlers.__setitem__, ApiKey.PRODUCE, record)
    try:
        # a SCRAM user, created by admin over SASL_SSL with Sluice's admin client
        admin_config = {
            "bootstrap.servers": address, "security.protocol": "SASL_SSL",
            "ssl.truststore.location": str(pki.ca), "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": f'{PLAIN_MODULE} required username="admin" '
                                'password="admin-secret";',
        }  # fmt: skip
        from sluice.client.admin import UserScramCredentialUpsertion

        with Admin(admin_config) as admin:
            admin.alter_user_scram_credentials(
                [UserScramCredentialUpsertion("carol", "SCRAM-SHA-512", "carol-secret")]
            )
        producer = Producer({
            "bootstrap.servers": address, **_ssl(pki), "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "carol", "sasl.password": "carol-secret",
        })  # fmt: skip
        producer.produce("sasl-ssl", b"confluent")
        assert producer.flush(15) == 0
        kp = KafkaProducer(
            bootstrap_servers=address, security_protocol="SASL_SSL", ssl_cafile=str(pki.ca),
            sasl_mechanism="PLAIN", sasl_plain_username="alice",
            sasl_plain_password="alice-secret",
        )  # fmt: skip
        kp.send("sasl-ssl", b"kafka-python").get(timeout=15)
        kp.close()

        async def aio() -> None:
            producer = aiokafka.AIOKafkaProducer(
                bootstrap_servers=address, security_protocol="SASL_SSL",
                ssl_context=create_ssl_context(cafile=str(pki.ca)),
                sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="carol",
                sasl_plain_password="carol-secret",
            )  # fmt: skip
            await producer.start()
            try:
                await producer.send_and_wait("sasl-ssl", b"aiokafka")
            finally:
                await producer.stop()

        asyncio.run(aio())
        alice = {**admin_config, "sasl.jaas.config": None, "sasl.username": "alice",
                 "sasl.password": "alice-secret"}  # fmt: skip
        with SluiceProducer(alice) as sp:
            sp.send("sasl-ssl", b"sluice").get(timeout=15)
    finally:
        sasl_ssl.call(handlers.__setitem__, ApiKey.PRODUCE, produce)
    assert {p.name for p in seen} == {"carol", "alice"}


def test_a_wrong_password_over_tls(sasl_ssl: sluice.EmbeddedBroker, pki: DevelopmentPki) -> None:
    errors: list[KafkaError] = []
    producer = Producer({
        "bootstrap.servers": sasl_ssl.bootstrap_servers, **_ssl(pki), "sasl.mechanism": "PLAIN",
        "sasl.username": "alice", "sasl.password": "nope", "error_cb": errors.append,
    })  # fmt: skip
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    assert errors and "Invalid username or password" in errors[0].str()
    config = {
        "bootstrap.servers": sasl_ssl.bootstrap_servers, "security.protocol": "SASL_SSL",
        "ssl.truststore.location": str(pki.ca), "sasl.mechanism": "PLAIN",
        "sasl.username": "alice", "sasl.password": "nope",
    }  # fmt: skip
    with pytest.raises(SaslAuthenticationException, match="Invalid username or password"):
        Admin(config).describe_cluster()
