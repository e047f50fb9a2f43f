"""TLS listeners with real clients: confluent-kafka, kafka-python and aiokafka produce,
consume and administer over SSL, with and without client certificates; a client
certificate names the principal through ssl.principal.mapping.rules; bad certificates and
plaintext clients are refused while the broker keeps serving; several listeners at once."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewTopic as AIONewTopic
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic as KafkaNewTopic
from kafka.errors import KafkaTimeoutError

import sluice
from sluice.protocol import ApiKey
from sluice.security import Session
from sluice.security.certificates import DevelopmentPki, write_development_pki
from support.waiting import wait_until

pytestmark = pytest.mark.integration  # brokers, sockets, real clients


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> DevelopmentPki:
    return write_development_pki(
        tmp_path_factory.mktemp("pki"), clients=["alice", "bob"], key_password="keypass"
    )


@pytest.fixture(scope="module")
def rogue(tmp_path_factory: pytest.TempPathFactory) -> DevelopmentPki:
    """Certificates from another CA, which the broker does not trust."""
    return write_development_pki(tmp_path_factory.mktemp("rogue"), clients=["mallory"])


@pytest.fixture(scope="module")
def tls_broker(pki: DevelopmentPki) -> Iterator[sluice.EmbeddedBroker]:
    """Three listeners: PLAINTEXT; SSL without client authentication; MTLS (SSL) requiring
    a client certificate, whose common name becomes the principal."""
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "ssl.keystore.location": str(pki.broker),
        "ssl.key.password": "keypass",
        "ssl.truststore.location": str(pki.ca),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([a-z]+)$/$1/U,DEFAULT",
    }
    with sluice.EmbeddedBroker(config=config) as broker:
        yield broker


def _address(broker: sluice.EmbeddedBroker, listener: str) -> str:
    assert broker.broker is not None
    [port] = [s.port for s in broker.broker.servers if s.listener_name == listener]
    return f"127.0.0.1:{port}"


def _confluent(address: str, pki: DevelopmentPki, client: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": address,
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.ca),
        "ssl.endpoint.identification.algorithm": "https",  # the certificate names 127.0.0.1
    }
    if client is not None:
        keystore = str(pki.clients[client])
        conf.update({"ssl.certificate.location": keystore, "ssl.key.location": keystore,
                     "ssl.key.password": "keypass"})  # fmt: skip
    return conf


def _kafka_python(address: str, pki: DevelopmentPki, client: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap_servers": address,
        "security_protocol": "SSL",
        "ssl_cafile": str(pki.ca),
        "ssl_check_hostname": True,
    }
    if client is not None:
        keystore = str(pki.clients[client])
        conf.update({"ssl_certfile": keystore, "ssl_keyfile": keystore,
                     "ssl_password": "keypass"})  # fmt: skip
    return conf


def _consume_confluent(conf: dict[str, Any], topic: str, count: int) -> list[bytes]:
    consumer = Consumer({**conf, "group.id": f"{topic}-g", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:

        def polled() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
            return len(values) >= count

        wait_until(polled, 30, f"{count} records from {topic}")
    finally:
        consumer.close()
    return values


def test_confluent_kafka_produces_consumes_and_administers_over_ssl(
    tls_broker: sluice.EmbeddedBroker, pki: DevelopmentPki, topic: str
) -> None:
    conf = _confluent(_address(tls_broker, "SSL"), pki)
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    metadata = admin.list_topics(timeout=10)
    assert len(metadata.topics[topic].partitions) == 2
    # the broker list holds the SSL listener's address, as the client connected there
    assert [f"{b.host}:{b.port}" for b in metadata.brokers.values()] == [conf["bootstrap.servers"]]
    producer = Producer(conf)
    for i in range(200):
        producer.produce(topic, f"v{i}".encode(), partition=i % 2)
    assert producer.flush(15) == 0
    assert sorted(_consume_confluent(conf, topic, 200)) == sorted(
        f"v{i}".encode() for i in range(200)
    )


def test_large_fetches_over_tls_read_the_log_through_the_transport(
    tls_broker: sluice.EmbeddedBroker, pki: DevelopmentPki, topic: str
) -> None:
    """Fetch answers of several MB (no sendfile on TLS) arrive whole and in order."""
    conf = _confluent(_address(tls_broker, "SSL"), pki)
    producer = Producer({**conf, "linger.ms": 20, "batch.size": 1_000_000})
    values = [bytes([i % 251]) * 100_000 for i in range(60)]  # 6 MB
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    got = _consume_confluent(
        {**conf, "fetch.max.bytes": 8_000_000, "max.partition.fetch.bytes": 8_000_000},
        topic, len(values),
    )  # fmt: skip
    assert got == values


def test_kafka_python_over_ssl(
    tls_broker: sluice.EmbeddedBroker, pki: DevelopmentPki, topic: str
) -> None:
    conf = _kafka_python(_address(tls_broker, "SSL"), pki)
    admin = KafkaAdminClient(**conf)
    try:
        admin.create_topics([KafkaNewTopic(topic, 1, 1)])
        assert topic in admin.list_topics()
    finally:
        admin.close()
    producer = KafkaProducer(**conf)
    for i in range(50):
        producer.send(topic, f"k{i}".encode())
    producer.flush(15)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=15_000,
                             **conf)  # fmt: skip
    try:
        got = [m.value for _, m in zip(range(50), consumer, strict=False)]
    finally:
        consumer.close()
    assert got == [f"k{i}".encode() for i in range(50)]


def test_aiokafka_over_ssl_with_a_client_certificate(
    tls_broker: sluice.EmbeddedBroker, pki: DevelopmentPki, topic: str
) -> None:
    address = _address(tls_broker, "MTLS")
    keystore = str(pki.clients["bob"])

    async def run() -> list[bytes]:
        context = create_ssl_context(
            cafile=str(pki.ca), certfile=keystore, keyfile=keystore, password="keypass"
        )
        admin = AIOKafkaAdminClient(
            bootstrap_servers=address, security_protocol="SSL", ssl_context=context
        )
        await admin.start()
        try:
            await admin.create_topics([AIONewTopic(topic, 1, 1)])
            assert topic in await admin.list_topics()
        finally:
            await admin.close()
        producer = AIOKafkaProducer(
            bootstrap_servers=address, security_protocol="SSL", ssl_context=context
        )
        await producer.start()
        try:
            for i in range(20):
                await producer.send_and_wait(topic, f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=address, security_protocol="SSL", ssl_context=context,
            auto_offset_reset="earliest",
        )  # fmt: skip
        await consumer.start()
        try:
            out: list[bytes] = []
            while len(out) < 20:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 15)
                out += [m.value for records in batch.values() for m in records if m.value]
            return out
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [f"a{i}".encode() for i in range(20)]


def _recording_sessions(broker: sluice.EmbeddedBroker) -> tuple[list[Session], Any]:
    assert broker.broker is not None
    handlers = broker.broker.handlers
    metadata = handlers[ApiKey.METADATA]
    seen: list[Session] = []

    def record(ctx: Any, request: Any) -> Any:
        seen.append(ctx.session)
        return metadata(ctx, request)

    broker.call(handlers.__setitem__, ApiKey.METADATA, record)
    return seen, lambda: broker.call(handlers.__setitem__, ApiKey.METADATA, metadata)


def test_a_client_certificate_names_the_principal(
    tls_broker: sluice.EmbeddedBroker, pki: DevelopmentPki
) -> None:
    seen, restore = _recording_sessions(tls_broker)
    try:
        AdminClient(_confluent(_address(tls_broker, "MTLS"), pki, "alice")).list_topics(timeout=10)
        admin = KafkaAdminClient(**_kafka_python(_address(tls_broker, "MTLS"), pki, "bob"))
        admin.list_topics()
        admin.close()
        AdminClient(_confluent(_address(tls_broker, "SSL"), pki, "alice")).list_topics(timeout=10)
    finally:
        restore()
    by_listener = {(s.listener_name, str(s.principal)) for s in seen}
    # RULE:^CN=([a-z]+)$/$1/U on MTLS; on SSL no certificate is asked for: anonymous
    assert by_listener == {
        ("MTLS", "User:ALICE"), ("MTLS", "User:BOB"), ("SSL", "User:ANONYMOUS"),
    }  # fmt: skip
    assert {s.security_protocol for s in seen} == {"SSL"}


def _refused_by_confluent(conf: dict[str, Any]) -> None:
    with pytest.raises(KafkaException):
        AdminClient({**conf, "socket.timeout.ms": 3000}).list_topics(timeout=3)


def test_bad_client_certificates_are_refused_and_the_broker_keeps_serving(
    tls_broker: sluice.EmbeddedBroker, pki: DevelopmentPki, rogue: DevelopmentPki
) -> None:
    mtls = _address(tls_broker, "MTLS")
    _refused_by_confluent(_confluent(mtls, pki))  # no certificate where one is required
    foreign = dict(_confluent(mtls, pki))
    keystore = str(rogue.clients["mallory"])
    foreign.update({"ssl.certificate.location": keystore, "ssl.key.location": keystore})
    _refused_by_confluent(foreign)  # signed by a CA the broker does not trust
    with pytest.raises(KafkaTimeoutError):  # kafka-python: no broker to bootstrap from
        KafkaAdminClient(**_kafka_python(mtls, pki), request_timeout_ms=3000,
                         bootstrap_timeout_ms=3000)  # fmt: skip
    # a client that does not trust the broker's CA refuses it, too
    _refused_by_confluent(_confluent(_address(tls_broker, "SSL"), rogue))
    # and the broker serves the others all along
    metadata = AdminClient(_confluent(mtls, pki, "alice")).list_topics(timeout=10)
    assert metadata.brokers


def test_a_plaintext_client_on_an_ssl_port_is_closed_cleanly(
    tls_broker: sluice.EmbeddedBroker, pki: DevelopmentPki
) -> None:
    host, port = _address(tls_broker, "SSL").split(":")
    # An ApiVersions request in the clear: not a TLS ClientHello; the broker closes.
    header = struct.pack(">hhih", ApiKey.API_VERSIONS, 0, 1, 4) + b"test"
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(header)) + header)
        received = b""
        while chunk := sock.recv(1024):  # until the broker closes (or the timeout fails)
            received += chunk
        assert received == b"" or received[0] == 0x15  # nothing, or a TLS alert record
    # kafka-python without TLS on the SSL port gets no broker
    with pytest.raises(KafkaTimeoutError):
        KafkaAdminClient(bootstrap_servers=f"{host}:{port}", request_timeout_ms=3000,
                         bootstrap_timeout_ms=3000)  # fmt: skip
    assert AdminClient(_confluent(f"{host}:{port}", pki)).list_topics(timeout=10).brokers


def test_a_stalled_handshake_is_closed(pki: DevelopmentPki) -> None:
    """A client that connects and never finishes the handshake is closed after
    socket.request.read.timeout.ms, and its connection slot is given back."""
    config = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.location": str(pki.broker),
        "ssl.key.password": "keypass",
        "socket.request.read.timeout.ms": "500",
        "max.connections": "1",
    }
    with sluice.EmbeddedBroker(config=config) as broker:
        host, port = _address(broker, "SSL").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as silent:
            silent.settimeout(10)
            assert silent.recv(1) == b""  # closed by the broker, not by the timeout here
        # the slot is free again: a real client connects
        assert AdminClient(_confluent(f"{host}:{port}", pki)).list_topics(timeout=10).brokers


def test_tls_settings_are_checked_at_start(pki: DevelopmentPki, tmp_path: Path) -> None:
    base = {"listeners": "SSL://127.0.0.1:0", "ssl.key.password": "keypass"}
    cases = [
        ({}, "needs a keystore"),
        ({"ssl.keystore.location": str(tmp_path / "none.pem")}, "cannot read"),
        ({"ssl.keystore.location": str(pki.broker), "ssl.key.password": "wrong"},
         "cannot load the keystore"),
        ({"ssl.keystore.location": str(pki.broker), "ssl.keystore.password": "x"},
         "cannot be specified with PEM"),
        ({"ssl.keystore.location": str(pki.broker), "ssl.keystore.type": "JKS"},
         "JKS is not supported"),
        ({"ssl.keystore.location": str(pki.broker), "ssl.client.auth": "maybe"},
         "ssl.client.auth"),
        ({"ssl.keystore.location": str(pki.broker), "ssl.enabled.protocols": "TLSv9"},
         "unknown protocol"),
        ({"ssl.keystore.location": str(pki.broker), "ssl.principal.mapping.rules": "RULE:x"},
         "Invalid rule"),
        ({"ssl.keystore.location": str(pki.broker), "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"},
         "all of"),
    ]  # fmt: skip
    for values, message in cases:
        with pytest.raises(RuntimeError) as failed:
            sluice.EmbeddedBroker(config={**base, **values}).start()
        assert message in str(failed.value.__cause__), (values, failed.value.__cause__)


def test_ssl_context_settings_take_effect(pki: DevelopmentPki) -> None:
    """ssl.enabled.protocols and ssl.cipher.suites decide what a handshake negotiates."""
    config = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.location": str(pki.broker),
        "ssl.key.password": "keypass",
        "ssl.enabled.protocols": "TLSv1.2",
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    }
    with sluice.EmbeddedBroker(config=config) as broker:
        host, port = _address(broker, "SSL").split(":")
        context = ssl.create_default_context(cafile=str(pki.ca))
        with (
            socket.create_connection((host, int(port)), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname=host) as tls,
        ):
            assert tls.version() == "TLSv1.2"
            assert tls.cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        with (
            socket.create_connection((host, int(port)), timeout=10) as raw,
            pytest.raises(ssl.SSLError),
        ):
            context.wrap_socket(raw, server_hostname=host)


def _pkcs12(pki: DevelopmentPki, path: Path, password: bytes) -> Path:
    key = serialization.load_pem_private_key(pki.broker.read_bytes(), b"keypass")
    cert, *chain = x509.load_pem_x509_certificates(pki.broker.read_bytes())
    path.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"broker", key, cert, chain,  # type: ignore[arg-type]
            serialization.BestAvailableEncryption(password),
        )
    )  # fmt: skip
    return path


def test_inline_pem_and_pkcs12_keystores(pki: DevelopmentPki, tmp_path: Path) -> None:
    """ssl.keystore.key/certificate.chain inline (line breaks lost, as in a continued
    properties value) and a PKCS12 keystore serve the same certificate."""
    text = pki.broker.read_text()
    key_end = text.index("-----END ENCRYPTED PRIVATE KEY-----") + 35
    inline = {
        "ssl.keystore.key": text[:key_end].replace("\n", ""),
        "ssl.keystore.certificate.chain": text[key_end:].replace("\n", " "),
        "ssl.key.password": "keypass",
    }
    store = _pkcs12(pki, tmp_path / "broker.p12", b"storepass")
    stores = {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(store),
        "ssl.keystore.password": "storepass",
    }
    for keystore in (inline, stores):
        config = {"listeners": "SSL://127.0.0.1:0", **keystore}
        with sluice.EmbeddedBroker(config=config) as broker:
            conf = _confluent(_address(broker, "SSL"), pki)
            assert AdminClient(conf).list_topics(timeout=10).brokers


def test_describe_configs_hides_the_key_password(
    tls_broker: sluice.EmbeddedBroker, pki: DevelopmentPki
) -> None:
    admin = AdminClient({"bootstrap.servers": _address(tls_broker, "PLAINTEXT")})
    resource = ConfigResource("broker", "0")
    configs = admin.describe_configs([resource])[resource].result(15)
    password = configs["ssl.key.password"]
    assert password.is_sensitive and password.value is None
    assert configs["ssl.keystore.location"].value == str(pki.broker)
    assert not configs["ssl.keystore.location"].is_sensitive


def test_frames_of_every_size_arrive_over_tls(
    tls_broker: sluice.EmbeddedBroker, pki: DevelopmentPki, topic: str
) -> None:
    """Produce requests from a few bytes to about 1 MB, whose ends fall anywhere in a TLS
    record: each is received whole (the receive low-water mark leaves room for the record
    TLS holds) and acknowledged."""
    conf = _confluent(_address(tls_broker, "SSL"), pki)
    producer = Producer({**conf, "linger.ms": 2, "batch.size": 1_000_000})
    sizes = [(i * 7919) % 400_000 + 1 for i in range(150)]
    acked: list[int] = []
    for size in sizes:
        producer.produce(
            topic, b"s" * size, on_delivery=lambda e, m: e is None and acked.append(len(m))
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    assert sorted(acked) == sorted(sizes)
