"""The console on a SASL listener with ACLs: users log in with their Kafka credentials
(HTTP Basic, used as SASL PLAIN), and each sees and changes what the ACLs let that user
see and change — checked against confluent-kafka and kafka-python logged in as the
same users."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaConsumer

import sluice
from support.console import ConsoleHttp
from support.sasl import plain_jaas
from support.waiting import wait_until

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(USERS),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "connection.failed.authentication.delay.ms": "20",
        "offsets.topic.num.partitions": 1,
        "console.port": 0,
    }


def _confluent(broker: sluice.EmbeddedBroker, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user],
    }  # fmt: skip


def test_logins_and_acls(broker: sluice.EmbeddedBroker) -> None:
    status, body = ConsoleHttp(broker).request("GET", "/api/cluster")
    assert (status, body["code"]) == (401, "LOGIN_REQUIRED")
    status, body = ConsoleHttp(broker, "alice", "wrong").request("GET", "/api/cluster")
    assert (status, body["code"]) == (401, "LOGIN_FAILED")

    alice = ConsoleHttp(broker, "alice", USERS["alice"])
    admin = ConsoleHttp(broker, "admin", USERS["admin"])
    assert alice.get("/api/session")["user"] == "alice"
    assert alice.get("/api/cluster")["brokers"][0]["port"] == broker.port

    status, body = alice.request("POST", "/api/topics", {"name": "ledger", "partitions": 2})
    assert (status, body["code"]) == (403, "TOPIC_AUTHORIZATION_FAILED")
    assert admin.request("POST", "/api/topics", {"name": "ledger", "partitions": 2})[0] == 201
    confluent_admin = AdminClient(_confluent(broker, "admin"))
    assert len(confluent_admin.list_topics(timeout=10).topics["ledger"].partitions) == 2

    assert "ledger" not in {t["name"] for t in alice.get("/api/topics")["topics"]}
    assert alice.request("GET", "/api/topics/ledger")[1]["code"] == "TOPIC_AUTHORIZATION_FAILED"
    grant = AclBinding(ResourceType.TOPIC, "ledger", ResourcePatternType.LITERAL, "User:alice",
                       "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)  # fmt: skip
    for future in confluent_admin.create_acls([grant]).values():
        future.result(10)
    topics = {t["name"]: t for t in alice.get("/api/topics")["topics"]}
    assert topics["ledger"]["partitions"] == 2
    assert topics["ledger"]["size_bytes"] is None  # DescribeLogDirs needs DESCRIBE on the cluster
    assert admin.get("/api/topics")["topics"][0]["size_bytes"] == 0  # nothing written yet
    assert alice.get("/api/topics/ledger")["configs"] is None  # no DESCRIBE_CONFIGS
    producer = Producer(_confluent(broker, "admin"))
    producer.produce("ledger", b"entry", partition=0)
    assert producer.flush(30) == 0
    newest = admin.get("/api/topics/ledger/partitions/0/records")["records"]
    assert [r["offset"] for r in newest] == [0]
    status, body = alice.request("GET", "/api/topics/ledger/partitions/0/records")
    assert (status, body["code"]) == (403, "TOPIC_AUTHORIZATION_FAILED")  # no READ

    status, body = alice.request("DELETE", "/api/topics/ledger")
    assert (status, body["code"]) == (403, "TOPIC_AUTHORIZATION_FAILED")
    assert admin.request("DELETE", "/api/topics/ledger")[0] == 200
    python_admin_view = KafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN", sasl_plain_username="admin", sasl_plain_password="admin-secret",
    )  # fmt: skip
    try:
        wait_until(lambda: "ledger" not in python_admin_view.topics(), 30, "ledger deleted")
    finally:
        python_admin_view.close()
    assert broker.broker is not None and broker.broker.console is not None
    assert len(broker.broker.console.sessions) == 2  # alice and admin, the failures not kept


@pytest.mark.integration
def test_a_scram_login_over_sasl_ssl(tmp_path_factory: pytest.TempPathFactory) -> None:
    """On a SASL_SSL listener the console's clients trust the listener's truststore and
    log in with SCRAM when the listener enables it; a user with only a SCRAM credential
    logs in that way."""
    from sluice.client import Admin
    from sluice.client.admin import UserScramCredentialUpsertion
    from sluice.security.certificates import write_development_pki

    pki = write_development_pki(tmp_path_factory.mktemp("pki"), key_password="keypass")
    config = {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(USERS, "admin"),
        "ssl.keystore.location": str(pki.broker),
        "ssl.key.password": "keypass",
        "ssl.truststore.location": str(pki.ca),
        "console.port": 0,
    }
    with sluice.EmbeddedBroker(config=config) as broker:
        admin_config = {
            "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_SSL",
            "ssl.truststore.location": str(pki.ca), "sasl.mechanism": "PLAIN",
            "sasl.username": "admin", "sasl.password": USERS["admin"],
        }  # fmt: skip
        with Admin(admin_config) as admin:
            admin.alter_user_scram_credentials(
                [UserScramCredentialUpsertion("carol", "SCRAM-SHA-512", "carol-secret")]
            )
        carol = ConsoleHttp(broker, "carol", "carol-secret")
        assert carol.get("/api/session")["security_protocol"] == "SASL_SSL"
        assert carol.get("/api/cluster")["brokers"][0]["port"] == broker.port
        assert carol.request("POST", "/api/topics", {"name": "by-carol"})[0] == 201
        confluent = AdminClient({
            "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca), "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "carol", "sasl.password": "carol-secret",
        })  # fmt: skip
        assert "by-carol" in confluent.list_topics(timeout=10).topics
        assert ConsoleHttp(broker, "carol", "nope").request("GET", "/api/cluster")[0] == 401
