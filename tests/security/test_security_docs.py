"""docs/security.md's, docs/acls.md's and docs/quotas.md's examples, run as written
(tests/support/doc_examples.py): the development CA made with ``sluice certs``, brokers
started with the documented properties (ports rewritten to free ones, ``/path/to/pki``
to the CA's directory), the documented client settings used with Sluice's clients,
confluent-kafka, kafka-python and aiokafka, and the documented ``sluice configs`` (SCRAM
users, also through ZooKeeper, and quotas) and ``sluice acls`` commands, each printing
what the document says it prints. An example the document changes or drops fails here."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

import sluice
from sluice.client import Admin, NewTopic, Producer
from sluice.client.errors import SaslAuthenticationException
from sluice.config import parse_properties
from support.doc_examples import Example, commands, examples, rewrite, run_as_documented
from support.waiting import wait_until

pytestmark = pytest.mark.integration  # brokers, ZooKeeper, clients

DOC = examples("security.md", "acls.md", "quotas.md")
TIMEOUT_S = 15


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Path]:
    """The examples' working directory (they name ``./pki``, ``admin.properties``)."""
    before = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(before)


@contextlib.contextmanager
def documented_broker(settings: dict[str, str]) -> Iterator[dict[str, str]]:
    """A broker with the documented ``settings``, each listener on a free loopback port;
    yields the document's addresses (``127.0.0.1:9092``, ``localhost:9093``) -> the
    listener's real one."""
    named: dict[str, str] = {}
    listeners = []
    for item in settings["listeners"].split(","):
        name, _, address = item.partition("://")
        named[address.rpartition(":")[2]] = name
        listeners.append(f"{name}://127.0.0.1:0")
    config = {**settings, "listeners": ",".join(listeners)}
    config.pop("advertised.listeners", None)
    with sluice.EmbeddedBroker(config=config) as broker:
        assert broker.broker is not None
        bound = {e.listener_name: e.port for e in broker.broker.advertised}
        yield {
            f"{host}:{port}": f"127.0.0.1:{bound[name]}"
            for port, name in named.items()
            for host in ("127.0.0.1", "localhost")
        }


def make_ca(work: Path) -> dict[str, str]:
    """Run the ``sluice certs`` example; the replacement of the documents' PKI path."""
    (certs,) = commands(DOC["certs"].text)
    out = run_as_documented(certs)
    pki = work / "pki"
    for name in ("ca.pem", "ca-key.pem", "broker.pem", "client-alice.pem", "client-bob.pem"):
        assert (pki / name).is_file(), (name, out)
    return {"/path/to/pki": str(pki)}


def statements(example: Example, addresses: dict[str, str]) -> list[ast.stmt]:
    return ast.parse(rewrite(example.text, addresses)).body


def evaluate(statement: ast.stmt, namespace: dict[str, Any]) -> Any:
    """The value of an expression statement of an example (else run it; None)."""
    if isinstance(statement, ast.Expr):
        return eval(compile(ast.Expression(statement.value), "<doc>", "eval"), namespace)
    exec(compile(ast.Module([statement], []), "<doc>", "exec"), namespace)
    return None


def produce_with(client: Any, topic: str, value: bytes) -> None:
    """Send one record with a client a documented example made, and wait for it."""
    if isinstance(client, dict):  # a confluent-kafka configuration
        client = ConfluentProducer(client)
    if isinstance(client, ConfluentProducer):
        client.produce(topic, value)
        assert client.flush(TIMEOUT_S) == 0
    elif isinstance(client, KafkaProducer):
        try:
            client.send(topic, value).get(TIMEOUT_S)
        finally:
            client.close(timeout=5)
    elif callable(client) and not isinstance(client, Producer):  # makes an aiokafka one

        async def send() -> None:
            producer = client()  # on the running loop, as aiokafka wants
            await producer.start()
            try:
                await producer.send_and_wait(topic, value)
            finally:
                await producer.stop()

        asyncio.run(send())
    else:
        assert isinstance(client, Producer), client
        try:
            client.send(topic, value).get(TIMEOUT_S)
        finally:
            client.close()


def aiokafka_producer(setup: list[ast.stmt], last: ast.stmt) -> Any:
    """What makes the producer of an aiokafka example (``setup``, then the expression
    ``last``), which must run on the event loop the producer is used on."""
    namespace: dict[str, Any] = {"AIOKafkaProducer": AIOKafkaProducer}
    for statement in setup:
        evaluate(statement, namespace)
    return lambda: evaluate(last, namespace)


def end_offset(address: str, topic: str, config: dict[str, Any]) -> int:
    consumer = ConfluentConsumer({**config, "bootstrap.servers": address, "group.id": "docs"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), TIMEOUT_S)[1])
    finally:
        consumer.close()


def test_tls_and_quota_examples(work: Path) -> None:
    pki = make_ca(work)
    settings = parse_properties(rewrite(DOC["tls-broker"].text, pki))
    with documented_broker(settings) as addresses:
        ssl_address = addresses["127.0.0.1:9093"]
        tool_config = work / "client-ssl.properties"
        tool_config.write_text(rewrite(DOC["tls-tool-properties"].text, pki))
        run_as_documented(commands(
            f"sluice topics create --bootstrap-server {ssl_address} --command-config "
            f"{tool_config} --topic docs-tls --partitions 1"
        )[0])  # fmt: skip
        namespace: dict[str, Any] = {}
        for statement in statements(DOC["tls-sluice-client"], addresses):
            evaluate(statement, namespace)
        produce_with(namespace["producer"], "docs-tls", b"sluice")
        confluent = eval(rewrite(DOC["tls-confluent-kafka"].text, addresses))
        produce_with(confluent, "docs-tls", b"confluent-kafka")
        (kafka_python,) = statements(DOC["tls-kafka-python"], addresses)
        produce_with(evaluate(kafka_python, {"KafkaProducer": KafkaProducer}), "docs-tls", b"kp")
        *setup, last = statements(DOC["tls-aiokafka"], addresses)
        produce_with(aiokafka_producer(setup, last), "docs-tls", b"aiokafka")
        assert end_offset(ssl_address, "docs-tls", confluent) == 4
        # the quota commands, on the PLAINTEXT listener of the same broker
        for command in commands(rewrite(DOC["quotas"].text, addresses)):
            run_as_documented(command)


def sasl_broker_settings(pki: dict[str, str]) -> dict[str, str]:
    """The SASL example's settings and, for its SASL_SSL listener, the TLS example's
    keystore and truststore ("With SASL_SSL the ssl.* settings of TLS apply")."""
    tls = parse_properties(rewrite(DOC["tls-broker"].text, pki))
    keys = ("ssl.keystore.location", "ssl.key.password", "ssl.truststore.location")
    return {**{k: tls[k] for k in keys}, **parse_properties(DOC["sasl-broker"].text)}


def test_sasl_and_scram_examples(work: Path) -> None:
    pki = make_ca(work)
    with documented_broker(sasl_broker_settings(pki)) as addresses:
        (work / "admin.properties").write_text(DOC["admin-properties"].text)
        add, describe, delete = commands(rewrite(DOC["scram-users"].text, addresses))
        run_as_documented(add)
        run_as_documented(describe)
        sasl_address = addresses["127.0.0.1:9092"]
        admin = Admin({"bootstrap.servers": sasl_address,
                       **parse_properties(DOC["admin-properties"].text)})  # fmt: skip
        try:
            admin.create_topics([NewTopic("docs-sasl", 1, 1)])
        finally:
            admin.close()
        bob = {"bootstrap.servers": sasl_address,
               **parse_properties(DOC["sasl-client-properties"].text)}  # fmt: skip
        produce_with(Producer(bob), "docs-sasl", b"sluice")
        # its commented alternatives: librdkafka's names, an unsecured OAUTHBEARER token
        text = DOC["sasl-client-properties"].text
        librdkafka = text.split("# or librdkafka's: ", 1)[1].splitlines()[0]
        for alternative in (
            librdkafka.replace(" / ", "\n"),
            "\n".join(line[2:] for line in text.split("# OAUTHBEARER", 1)[1].splitlines()[1:]),
        ):
            settings = {**bob, **parse_properties(alternative)}
            if "sasl.username" in settings:
                del settings["sasl.jaas.config"]
            produce_with(Producer(settings), "docs-sasl", b"alternative")
        namespace = {"Producer": ConfluentProducer, "KafkaProducer": KafkaProducer}
        confluent, kafka_python, aiokafka = statements(DOC["sasl-clients"], addresses)
        for statement in (confluent, kafka_python):
            produce_with(evaluate(statement, namespace), "docs-sasl", b"another client")
        produce_with(aiokafka_producer([], aiokafka), "docs-sasl", b"aiokafka")
        run_as_documented(delete)  # bob's SCRAM-SHA-512 credential is gone
        with pytest.raises(SaslAuthenticationException):
            produce_with(Producer(bob), "docs-sasl", b"no more")


def test_scram_users_written_to_zookeeper(work: Path) -> None:
    from sluice.metastore.zk_server import ZooKeeperServer
    from support.zookeeper import require_zookeeper

    require_zookeeper()
    with ZooKeeperServer() as zookeeper:
        connect = str(zookeeper.connect_string)
        for command in commands(rewrite(DOC["scram-zookeeper"].text, {"127.0.0.1:2181": connect})):
            run_as_documented(command)


def test_acl_examples(work: Path) -> None:
    pki = make_ca(work)
    settings = {**sasl_broker_settings(pki), **parse_properties(DOC["acl-broker"].text)}
    with documented_broker(settings) as addresses:
        (work / "admin.properties").write_text(DOC["admin-properties"].text)
        address = addresses["localhost:9092"]
        admin_config = {"bootstrap.servers": address,
                        **parse_properties(DOC["admin-properties"].text)}  # fmt: skip
        admin = Admin(admin_config)
        try:
            admin.create_topics([NewTopic("orders", 1, 1)])
        finally:
            admin.close()
        produce_with(Producer(admin_config), "orders", b"order 1")
        alice = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                 "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}  # fmt: skip
        confluent_alice = {"bootstrap.servers": address, "security.protocol": "SASL_PLAINTEXT",
                           "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                           "sasl.password": "alice-secret", "log_level": 0}  # fmt: skip

        def orders_error() -> int:
            md = AdminClient(confluent_alice).list_topics("orders", timeout=TIMEOUT_S)
            error = md.topics["orders"].error
            return 0 if error is None else int(error.code())

        assert orders_error() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        grant, bob, carol, listing, remove = commands(rewrite(DOC["acls"].text, addresses))
        run_as_documented(grant)
        consumer = KafkaConsumer(bootstrap_servers=address, **alice)
        try:  # alice may read orders now (kafka-python)
            consumer.assign([KafkaTopicPartition("orders", 0)])
            consumer.seek_to_beginning()
            records = wait_until(lambda: consumer.poll(1000), 30, "alice reading orders")
            assert [r.value for batch in records.values() for r in batch] == [b"order 1"]
        finally:
            consumer.close()
        for command in (bob, carol):
            run_as_documented(command)
        listed = run_as_documented(listing)
        assert "User:bob" in listed and "patternType=PREFIXED" in listed
        removed = run_as_documented(remove)
        assert "Removed ACLs" in removed and "User:alice" in removed
        assert orders_error() == KafkaError.TOPIC_AUTHORIZATION_FAILED  # confluent-kafka
