"""SASL on a broker's listeners, with real clients: PLAIN, SCRAM-SHA-256/512 and
OAUTHBEARER (unsecured JWS, and signed JWTs against a JWKS) with confluent-kafka,
kafka-python and aiokafka; each failure gets the client's authentication error and the
broker serves others on; SCRAM users are managed with the admin API and survive a
restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import aiokafka
import aiokafka.errors
import kafka
import kafka.errors
import pytest
from aiokafka.abc import AbstractTokenProvider as AioTokenProvider
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka.net.sasl.oauth import AbstractTokenProvider

import sluice
from sluice.protocol import ApiKey
from sluice.security import KafkaPrincipal
from support.sasl import JWKS_VALIDATOR, OAUTH_MODULE, Jwks, plain_jaas, unsecured_token

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
ISSUER = "https://issuer.test"


@pytest.fixture(scope="module")
def jwks(tmp_path_factory: pytest.TempPathFactory) -> Jwks:
    return Jwks(tmp_path_factory.mktemp("jwks"))


def sasl_config(jwks: Jwks) -> dict[str, Any]:
    return {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,JWT://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,JWT:SASL_PLAINTEXT",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(USERS, "admin"),
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
            f"{OAUTH_MODULE} required unsecuredLoginStringClaim_sub=admin;"
        ),
        "listener.name.jwt.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.jwt.oauthbearer.sasl.server.callback.handler.class": JWKS_VALIDATOR,
        "listener.name.jwt.sasl.oauthbearer.jwks.endpoint.url": jwks.url,
        "sasl.oauthbearer.expected.audience": "kafka",
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "connection.failed.authentication.delay.ms": "50",
    }


@pytest.fixture(scope="module")
def broker_config(jwks: Jwks) -> dict[str, Any]:
    return sasl_config(jwks)


def address(broker: sluice.EmbeddedBroker, listener: str = "SASL_PLAINTEXT") -> str:
    assert broker.broker is not None
    [port] = [s.port for s in broker.broker.servers if s.listener_name == listener]
    return f"127.0.0.1:{port}"


def confluent(broker: sluice.EmbeddedBroker, mechanism: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": address(broker), "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism, **extra,
    }  # fmt: skip


@pytest.fixture(scope="module")
def scram_users(broker: sluice.EmbeddedBroker) -> dict[str, str]:
    """bob (SCRAM-SHA-256) and carol (SCRAM-SHA-512), created through the admin API by
    admin (PLAIN)."""
    admin = AdminClient(
        confluent(broker, "PLAIN", **{"sasl.username": "admin", "sasl.password": "admin-secret"})
    )
    futures = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"bob-secret"
            ),
            UserScramCredentialUpsertion(
                "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"carol-secret"
            ),
        ]
    )
    for future in futures.values():
        future.result(10)
    return {"bob": "bob-secret", "carol": "carol-secret"}


@pytest.fixture
def principals(broker: sluice.EmbeddedBroker) -> Iterator[list[KafkaPrincipal]]:
    """The principals of the Metadata requests served meanwhile."""
    assert broker.broker is not None
    handlers = broker.broker.handlers
    metadata = handlers[ApiKey.METADATA]
    seen: list[KafkaPrincipal] = []

    def record(ctx: Any, request: Any) -> Any:
        seen.append(ctx.principal)
        return metadata(ctx, request)

    broker.call(handlers.__setitem__, ApiKey.METADATA, record)
    yield seen
    broker.call(handlers.__setitem__, ApiKey.METADATA, metadata)


def produce_confluent(config: dict[str, Any], topic: str, value: bytes) -> None:
    producer = Producer(config)
    producer.produce(topic, value)
    assert producer.flush(15) == 0


def consume_confluent(config: dict[str, Any], topic: str) -> list[bytes]:
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return [message.value()]
        raise AssertionError("nothing consumed")
    finally:
        consumer.close()


def auth_error_confluent(config: dict[str, Any]) -> KafkaError:
    """The error a confluent-kafka client reports when it cannot authenticate."""
    errors: list[KafkaError] = []
    producer = Producer({**config, "error_cb": errors.append})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not errors:
        producer.poll(0.1)
    assert errors, "no error reported"
    return errors[0]


# -- PLAIN -------------------------------------------------------------------------------


def test_plain_with_every_client(
    broker: sluice.EmbeddedBroker, topic: str, principals: list[KafkaPrincipal]
) -> None:
    cfg = confluent(broker, "PLAIN", **{"sasl.username": "alice", "sasl.password": "alice-secret"})
    produce_confluent(cfg, topic, b"confluent")
    producer = kafka.KafkaProducer(
        bootstrap_servers=address(broker), security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret",
    )  # fmt: skip
    producer.send(topic, b"kafka-python").get(timeout=15)
    producer.close()

    async def aio() -> list[bytes]:
        consumer = aiokafka.AIOKafkaConsumer(
            topic, bootstrap_servers=address(broker), security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN", sasl_plain_username="alice",
            sasl_plain_password="alice-secret", auto_offset_reset="earliest",
        )  # fmt: skip
        await consumer.start()
        try:
            got = await consumer.getmany(timeout_ms=10_000, max_records=2)
            values = [r.value for records in got.values() for r in records]
            while len(values) < 2:
                values.append((await consumer.getone()).value)
            return values
        finally:
            await consumer.stop()

    assert sorted(asyncio.run(aio())) == [b"confluent", b"kafka-python"]
    assert set(principals) == {KafkaPrincipal("User", "alice")}


def kafka_python_error(broker: sluice.EmbeddedBroker, caplog: Any, **config: Any) -> str:
    """kafka-python's log of a failed authentication (its producer keeps retrying the
    bootstrap, then raises a timeout)."""
    caplog.clear()
    with pytest.raises(kafka.errors.KafkaError):
        kafka.KafkaProducer(
            bootstrap_servers=address(broker), security_protocol="SASL_PLAINTEXT",
            bootstrap_timeout_ms=2000, **config,
        )  # fmt: skip
    return "\n".join(r.getMessage() for r in caplog.records)


def aiokafka_error(broker: sluice.EmbeddedBroker, caplog: Any, **config: Any) -> str:
    """aiokafka's log of a failed authentication (start() then fails to bootstrap)."""
    caplog.clear()

    async def start() -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=address(broker), security_protocol="SASL_PLAINTEXT", **config
        )
        try:
            await producer.start()
        finally:
            await producer.stop()

    with pytest.raises(aiokafka.errors.KafkaError):
        asyncio.run(start())
    return "\n".join(r.getMessage() for r in caplog.records)


PLAIN_FAILED = "Authentication failed: Invalid username or password"


def test_plain_failures_and_the_broker_serves_on(
    broker: sluice.EmbeddedBroker, topic: str, caplog: Any
) -> None:
    for user, password in (("alice", "nope"), ("mallory", "x")):
        error = auth_error_confluent(
            confluent(broker, "PLAIN", **{"sasl.username": user, "sasl.password": password})
        )
        assert error.code() == KafkaError._AUTHENTICATION
        assert PLAIN_FAILED in error.str()
        plain = {"sasl_mechanism": "PLAIN", "sasl_plain_username": user,
                 "sasl_plain_password": password}  # fmt: skip
        assert f"SaslAuthenticationFailedError: {PLAIN_FAILED}" in kafka_python_error(
            broker, caplog, **plain
        )
        assert f"SaslAuthenticationFailed: {PLAIN_FAILED}" in aiokafka_error(
            broker, caplog, **plain
        )
    # the broker serves others meanwhile and after
    cfg = confluent(broker, "PLAIN", **{"sasl.username": "alice", "sasl.password": "alice-secret"})
    produce_confluent(cfg, topic, b"still serving")


# -- SCRAM ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("user", "mechanism"), [("bob", "SCRAM-SHA-256"), ("carol", "SCRAM-SHA-512")]
)
def test_scram_with_every_client(
    broker: sluice.EmbeddedBroker,
    scram_users: dict[str, str],
    topic: str,
    user: str,
    mechanism: str,
    principals: list[KafkaPrincipal],
) -> None:
    password = scram_users[user]
    cfg = confluent(broker, mechanism, **{"sasl.username": user, "sasl.password": password})
    produce_confluent(cfg, topic, b"confluent")
    producer = kafka.KafkaProducer(
        bootstrap_servers=address(broker), security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password,
    )  # fmt: skip
    producer.send(topic, b"kafka-python").get(timeout=15)
    producer.close()

    async def aio() -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=address(broker), security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password,
        )  # fmt: skip
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"aiokafka")
        finally:
            await producer.stop()

    asyncio.run(aio())
    assert sorted(consume_all(cfg, topic, 3)) == [b"aiokafka", b"confluent", b"kafka-python"]
    assert set(principals) == {KafkaPrincipal("User", user)}


def consume_all(config: dict[str, Any], topic: str, count: int) -> list[bytes]:
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(values) < count:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


SCRAM_FAILED = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
)


@pytest.mark.parametrize(
    ("user", "password", "mechanism"),
    [
        ("bob", "wrong", "SCRAM-SHA-256"),  # wrong password
        ("mallory", "x", "SCRAM-SHA-256"),  # unknown user
        ("bob", "bob-secret", "SCRAM-SHA-512"),  # no credential for that mechanism
    ],
)
def test_scram_failures(
    broker: sluice.EmbeddedBroker,
    scram_users: dict[str, str],
    topic: str,
    caplog: Any,
    user: str,
    password: str,
    mechanism: str,
) -> None:
    message = SCRAM_FAILED.format(mechanism)
    error = auth_error_confluent(
        confluent(broker, mechanism, **{"sasl.username": user, "sasl.password": password})
    )
    assert error.code() == KafkaError._AUTHENTICATION
    assert message in error.str()
    scram = {"sasl_mechanism": mechanism, "sasl_plain_username": user,
             "sasl_plain_password": password}  # fmt: skip
    assert message in kafka_python_error(broker, caplog, **scram)
    assert message in aiokafka_error(broker, caplog, **scram)
    good = scram_users["bob"]
    cfg = confluent(broker, "SCRAM-SHA-256", **{"sasl.username": "bob", "sasl.password": good})
    produce_confluent(cfg, topic, b"still serving")


def test_scram_users_are_described_and_deleted(
    broker: sluice.EmbeddedBroker, scram_users: dict[str, str]
) -> None:
    admin_cfg = confluent(
        broker, "PLAIN", **{"sasl.username": "admin", "sasl.password": "admin-secret"}
    )
    admin = AdminClient(admin_cfg)
    everyone = admin.describe_user_scram_credentials().result(10)
    assert {
        user: [(i.mechanism, i.iterations) for i in d.scram_credential_infos]
        for user, d in everyone.items()
    } == {
        "bob": [(ScramMechanism.SCRAM_SHA_256, 8192)],
        "carol": [(ScramMechanism.SCRAM_SHA_512, 4096)],
    }
    bob = admin.describe_user_scram_credentials(["bob"])["bob"].result(10)
    assert [i.iterations for i in bob.scram_credential_infos] == [8192]
    with pytest.raises(KafkaException, match="does not exist"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(10)
    futures = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"x"
            )
        ]
    )
    with pytest.raises(KafkaException, match="Too few iterations"):
        futures["dave"].result(10)
    upsert = UserScramCredentialUpsertion(
        "erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"erin-secret"
    )
    admin.alter_user_scram_credentials([upsert])["erin"].result(10)
    erin = confluent(
        broker, "SCRAM-SHA-256", **{"sasl.username": "erin", "sasl.password": "erin-secret"}
    )
    produce_confluent(erin, "erin-topic", b"hi")
    delete = UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_256)
    admin.alter_user_scram_credentials([delete])["erin"].result(10)
    error = auth_error_confluent(erin)
    assert SCRAM_FAILED.format("SCRAM-SHA-256") in error.str()


# -- OAUTHBEARER ---------------------------------------------------------------------------


class KafkaPythonToken(AbstractTokenProvider):
    def __init__(self, token: str) -> None:
        self._token = token

    def token(self) -> str:
        return self._token


class AioToken(AioTokenProvider):
    def __init__(self, token: str) -> None:
        self._token = token

    async def token(self) -> str:
        return self._token


def test_oauthbearer_unsecured_with_every_client(
    broker: sluice.EmbeddedBroker, topic: str, principals: list[KafkaPrincipal]
) -> None:
    cfg = confluent(
        broker, "OAUTHBEARER",
        **{"enable.sasl.oauthbearer.unsecure.jwt": True,
           "sasl.oauthbearer.config": "principal=alice"},
    )  # fmt: skip
    produce_confluent(cfg, topic, b"confluent")
    producer = kafka.KafkaProducer(
        bootstrap_servers=address(broker), security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=KafkaPythonToken(unsecured_token("bob")),
    )  # fmt: skip
    producer.send(topic, b"kafka-python").get(timeout=15)
    producer.close()

    async def aio() -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=address(broker), security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=AioToken(unsecured_token("carol")),
        )  # fmt: skip
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"aiokafka")
        finally:
            await producer.stop()

    asyncio.run(aio())
    assert {p.name for p in principals} == {"alice", "bob", "carol"}


def test_expired_and_unsigned_tokens_fail(
    broker: sluice.EmbeddedBroker, jwks: Jwks, topic: str, caplog: Any
) -> None:
    expired = unsecured_token("alice", lifetime_s=-60)
    error = auth_error_confluent(
        confluent(broker, "OAUTHBEARER", oauth_cb=lambda _: (expired, time.time() + 60))
    )
    assert error.code() == KafkaError._AUTHENTICATION
    assert '{"status":"invalid_token"}' in error.str()
    provider = {"sasl_mechanism": "OAUTHBEARER"}
    assert '{"status":"invalid_token"}' in kafka_python_error(
        broker, caplog, sasl_oauth_token_provider=KafkaPythonToken(expired), **provider
    )
    # aiokafka takes the server's error challenge for success and goes on with a
    # Metadata request, which ends the connection (as Kafka does): it cannot start.
    aiokafka_error(broker, caplog, sasl_oauth_token_provider=AioToken(expired), **provider)
    # on the JWT listener an unsecured token, an expired signed one, a wrong audience fail
    jwt_listener = {**confluent(broker, "OAUTHBEARER"), "bootstrap.servers": address(broker, "JWT")}
    for token in (
        unsecured_token("alice"),
        jwks.token("alice", lifetime_s=-120, aud="kafka", iss=ISSUER),
        jwks.token("alice", aud="other", iss=ISSUER),
        jwks.token("alice", aud="kafka", iss="https://elsewhere"),
    ):
        error = auth_error_confluent(
            {**jwt_listener, "oauth_cb": lambda _, t=token: (t, time.time() + 60)}
        )
        assert '{"status":"invalid_token"}' in error.str()


def test_signed_jwts_against_a_jwks(
    broker: sluice.EmbeddedBroker, jwks: Jwks, topic: str, principals: list[KafkaPrincipal]
) -> None:
    token = jwks.token("alice", aud="kafka", iss=ISSUER)
    cfg = {
        **confluent(broker, "OAUTHBEARER"), "bootstrap.servers": address(broker, "JWT"),
        "oauth_cb": lambda _: (token, time.time() + 3600),
    }  # fmt: skip
    produce_confluent(cfg, topic, b"signed")
    producer = kafka.KafkaProducer(
        bootstrap_servers=address(broker, "JWT"), security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=KafkaPythonToken(jwks.token("bob", aud="kafka", iss=ISSUER)),
    )  # fmt: skip
    producer.send(topic, b"kafka-python").get(timeout=15)
    producer.close()
    assert {p.name for p in principals} == {"alice", "bob"}


def test_mechanism_mismatch(broker: sluice.EmbeddedBroker, caplog: Any) -> None:
    error = auth_error_confluent(
        {
            **confluent(
                broker, "PLAIN", **{"sasl.username": "alice", "sasl.password": "alice-secret"}
            ),
            "bootstrap.servers": address(broker, "JWT"),
        }
    )
    assert error.code() == KafkaError._AUTHENTICATION
    assert "OAUTHBEARER" in error.str()
    plain = {"sasl_mechanism": "PLAIN", "sasl_plain_username": "alice",
             "sasl_plain_password": "alice-secret"}  # fmt: skip
    caplog.clear()
    with pytest.raises(kafka.errors.KafkaError):
        kafka.KafkaProducer(
            bootstrap_servers=address(broker, "JWT"), security_protocol="SASL_PLAINTEXT",
            bootstrap_timeout_ms=2000, **plain,
        )  # fmt: skip
    assert "UnsupportedSaslMechanism" in "\n".join(r.getMessage() for r in caplog.records)


def test_describe_configs_never_shows_passwords(broker: sluice.EmbeddedBroker) -> None:
    admin = AdminClient(
        confluent(broker, "PLAIN", **{"sasl.username": "admin", "sasl.password": "admin-secret"})
    )
    resource = ConfigResource("broker", "0")
    configs = admin.describe_configs([resource])[resource].result(15)
    assert configs["sasl.jaas.config"].is_sensitive
    assert configs["sasl.jaas.config"].value is None
    assert (
        configs["sasl.enabled.mechanisms"].value == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
    )
    assert not any("secret" in (c.value or "") for c in configs.values())
