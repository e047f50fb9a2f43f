"""SASL sessions over real connections: SCRAM users survive a restart; raw tokens after
SaslHandshake v0; a request before authentication closes the connection; KIP-368
re-authentication keeps a client's connection past its session's lifetime, and a
connection that does not re-authenticate is closed at its next request."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import kafka
import pytest
from confluent_kafka import Producer
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as HandshakeV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

import sluice
from sluice.security.sasl.authenticator import SaslServerAuthenticator
from support.sasl import alter_scram_request, plain_jaas, scram_login
from support.wire import RawClient

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


def sasl_broker_config(**extra: Any) -> dict[str, Any]:
    return {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(USERS),
        **extra,
    }


def _metadata() -> MetadataRequest:
    return MetadataRequest(
        topics=None, allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )  # fmt: skip


def _plain(client: RawClient, user: str = "alice", password: str = "alice-secret") -> Any:
    assert client.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0  # type: ignore[attr-defined]
    return client.request(SaslAuthenticateRequest(auth_bytes=f"\x00{user}\x00{password}".encode()))


def test_scram_users_survive_a_restart(tmp_path: Path) -> None:
    embedded = sluice.EmbeddedBroker(config=sasl_broker_config(), log_dir=tmp_path)
    with embedded:
        address = embedded.bootstrap_servers
        client = RawClient(address)
        try:
            assert _plain(client, "admin", "admin-secret").error_code == 0
            response: Any = client.request(alter_scram_request("carol", "carol-pw", mechanism=2))
            assert [r.error_code for r in response.results] == [0]
        finally:
            client.close()
        assert scram_login(address, "carol", "carol-pw", "SCRAM-SHA-512")
    with embedded:  # the same data directory
        address = embedded.bootstrap_servers
        assert scram_login(address, "carol", "carol-pw", "SCRAM-SHA-512")
        assert not scram_login(address, "carol", "wrong", "SCRAM-SHA-512")
        producer = kafka.KafkaProducer(
            bootstrap_servers=address, security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="carol",
            sasl_plain_password="carol-pw",
        )  # fmt: skip
        producer.send("after-restart", b"x").get(timeout=15)
        producer.close()


def test_raw_tokens_after_a_v0_handshake(broker: sluice.EmbeddedBroker) -> None:
    client = RawClient(broker.bootstrap_servers)
    try:
        answer: Any = client.request(HandshakeV0(mechanism="PLAIN"))
        assert answer.error_code == 0 and "PLAIN" in answer.mechanisms
        token = b"\x00alice\x00alice-secret"
        client.send_raw(len(token).to_bytes(4, "big") + token)
        assert client.read_frame() == b""  # PLAIN's empty challenge, size-prefixed
        assert client.request(_metadata()).brokers  # type: ignore[attr-defined]
    finally:
        client.close()
    client = RawClient(broker.bootstrap_servers)
    try:
        client.request(HandshakeV0(mechanism="PLAIN"))
        token = b"\x00alice\x00wrong"
        client.send_raw(len(token).to_bytes(4, "big") + token)
        assert client.is_closed_by_broker()  # no answer can carry the error
    finally:
        client.close()


def test_a_request_before_authentication_closes_the_connection(
    broker: sluice.EmbeddedBroker,
) -> None:
    client = RawClient(broker.bootstrap_servers)
    try:
        client.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        client.correlation_id += 1
        from sluice.protocol import encode_request

        client.send_raw(encode_request(client.correlation_id, _metadata()))
        assert client.is_closed_by_broker()
    finally:
        client.close()
    # others are served meanwhile
    other = RawClient(broker.bootstrap_servers)
    try:
        assert _plain(other).error_code == 0
        assert other.request(_metadata()).brokers  # type: ignore[attr-defined]
    finally:
        other.close()


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return sasl_broker_config(**{"connections.max.reauth.ms": 1500})


def _reauthentications(broker: sluice.EmbeddedBroker) -> list[SaslServerAuthenticator]:
    assert broker.broker is not None
    return [
        c.authenticator
        for s in broker.broker.servers
        for c in list(s._connections)
        if c.authenticator is not None
    ]


def test_a_session_that_expires_closes_the_connection(broker: sluice.EmbeddedBroker) -> None:
    client = RawClient(broker.bootstrap_servers)
    try:
        answer = _plain(client)
        assert answer.error_code == 0
        assert answer.session_lifetime.total_seconds() == 1.5
        assert client.request(_metadata()).brokers  # type: ignore[attr-defined]
        time.sleep(1.6)
        from sluice.protocol import encode_request

        client.send_raw(encode_request(99, _metadata()))
        assert client.is_closed_by_broker()
    finally:
        client.close()


def test_clients_reauthenticate_on_the_same_connection(broker: sluice.EmbeddedBroker) -> None:
    errors: list[Any] = []
    producer = Producer({
        "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret",
        "error_cb": errors.append,
    })  # fmt: skip
    kp = kafka.KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret",
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 5  # over three session lifetimes
        sent = 0
        while time.monotonic() < deadline:
            producer.produce("reauth", b"confluent")
            assert producer.flush(10) == 0
            kp.send("reauth", b"kafka-python").get(timeout=10)
            sent += 1
            time.sleep(0.2)
        reauthenticated = [a for a in _reauthentications(broker) if a.reauthentications >= 2]
        # both clients' connections (librdkafka's and kafka-python's) re-authenticated
        assert len(reauthenticated) >= 2, [a.reauthentications for a in _reauthentications(broker)]
        assert not errors
    finally:
        kp.close()
        producer.flush(5)


def test_the_ready_line_names_the_mechanisms(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="sluice.server.broker")
    with sluice.EmbeddedBroker(config=sasl_broker_config()):
        pass
    ready = [r.getMessage() for r in caplog.records if "ready on" in r.getMessage()]
    assert ready and "(SASL PLAIN/SCRAM-SHA-512)" in ready[0]


def test_sluice_clients_reauthenticate(broker: sluice.EmbeddedBroker) -> None:
    from sluice.client import Producer as SluiceProducer

    before = {id(a) for a in _reauthentications(broker)}
    config = {
        "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret",
    }  # fmt: skip
    with SluiceProducer(config) as producer:
        deadline = time.monotonic() + 4.5  # three session lifetimes
        while time.monotonic() < deadline:
            producer.send("sluice-reauth", b"x").get(timeout=10)
            time.sleep(0.1)
        mine = [a for a in _reauthentications(broker) if id(a) not in before]
        assert max(a.reauthentications for a in mine) >= 2


def test_frames_before_authentication_are_bounded(broker: sluice.EmbeddedBroker) -> None:
    client = RawClient(broker.bootstrap_servers)
    try:  # over sasl.server.max.receive.size (512 KiB): closed at the size prefix
        client.send_raw((600_000).to_bytes(4, "big") + b"\0" * 100)
        assert client.is_closed_by_broker()
    finally:
        client.close()
    producer = Producer({  # once authenticated, socket.request.max.bytes applies
        "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret",
    })  # fmt: skip
    producer.produce("big-after-auth", b"x" * 700_000)
    assert producer.flush(15) == 0


def test_sasl_requests_on_a_plaintext_listener_are_illegal() -> None:
    with sluice.EmbeddedBroker() as plaintext:
        client = RawClient(plaintext.bootstrap_servers)
        try:
            handshake: Any = client.request(SaslHandshakeRequest(mechanism="PLAIN"))
            assert handshake.error_code == ErrorCode.illegal_sasl_state
            answer: Any = client.request(SaslAuthenticateRequest(auth_bytes=b"\x00a\x00b"))
            assert answer.error_code == ErrorCode.illegal_sasl_state
            assert answer.error_message == (
                "SaslAuthenticate request received after successful authentication"
            )
            assert client.request(_metadata()).brokers  # type: ignore[attr-defined]
        finally:
            client.close()
