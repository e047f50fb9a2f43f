"""``sluice acls`` against a broker with an authorizer, in process: kafka-acls' flags and
output, and the ACLs it adds taking effect for confluent-kafka."""

from __future__ import annotations

import io
import sys
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer

import sluice
from sluice.cli import main
from sluice.security.acl import AclBindingFilter


@pytest.fixture(scope="module")
def broker() -> Iterator[sluice.EmbeddedBroker]:
    # the tool itself runs as User:ANONYMOUS: it may alter the cluster's ACLs
    config = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
    with sluice.EmbeddedBroker(config=config) as embedded:
        assert embedded.broker is not None and embedded.broker.authorizer is not None
        yield embedded


def acls(
    broker: sluice.EmbeddedBroker,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *argv: str,
    stdin: str = "",
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    capsys.readouterr()
    code = main(["acls", "--bootstrap-server", broker.bootstrap_servers, *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_add_list_remove_as_kafka_acls(
    broker: sluice.EmbeddedBroker,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def run(*argv: str, stdin: str = "") -> tuple[int, str, str]:
        return acls(broker, capsys, monkeypatch, *argv, stdin=stdin)

    # without ALTER on the cluster the tool is refused, with the broker's error
    code, _, err = run("--add", "--allow-principal", "User:alice", "--topic", "t")
    assert code == 1 and "CLUSTER_AUTHORIZATION_FAILED" in err
    assert broker.broker is not None and broker.broker.authorizer is not None
    from sluice.security.acl import (
        CLUSTER_NAME,
        AccessControlEntry,
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePattern,
        ResourceType,
    )

    broker.broker.authorizer.create_acls([
        AclBinding(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME),
                   AccessControlEntry("User:ANONYMOUS", "*", AclOperation.ALTER,
                                      AclPermissionType.ALLOW)),
    ])  # fmt: skip

    code, out, err = run("--add", "--allow-principal", "User:alice", "--operation", "Read",
                         "--operation", "Describe", "--topic", "orders")  # fmt: skip
    assert code == 0, err
    pattern = "`ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`"
    assert out.startswith(f"Adding ACLs for resource {pattern}: \n")
    assert " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n" in out
    assert f"Current ACLs for resource {pattern}: \n" in out

    code, out, err = run("--add", "--allow-principal", "User:bob", "--producer", "--topic",
                         "pay-", "--transactional-id", "pay-",
                         "--resource-pattern-type", "prefixed")  # fmt: skip
    assert code == 0, err
    code, out, _ = run("--list", "--topic", "pay-eu", "--resource-pattern-type", "match")
    assert "name=pay-, patternType=PREFIXED" in out
    assert {"WRITE", "DESCRIBE", "CREATE"} == {
        line.split("operation=")[1].split(",")[0] for line in out.splitlines() if "User:bob" in line
    }
    code, out, _ = run("--list", "--principal", "User:alice")
    assert "User:alice" in out and "User:bob" not in out

    # --remove asks first; "n" keeps them, --force does not ask
    code, out, _ = run("--remove", "--topic", "orders", stdin="n\n")
    assert code == 0 and "Are you sure" in out
    assert "User:alice" in run("--list", "--topic", "orders")[1]
    code, out, _ = run("--remove", "--force", "--topic", "orders")
    assert code == 0 and "User:alice" in out
    assert "User:alice" not in run("--list")[1]

    # kafka-acls' usage errors
    assert run("--add", "--topic", "x")[0] == 2
    assert run("--add", "--allow-principal", "alice", "--topic", "x")[0] == 2
    assert run("--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "x")[0] == 2
    assert run("--add", "--allow-principal", "User:a", "--topic", "x",
               "--resource-pattern-type", "match")[0] == 2  # fmt: skip
    assert run("--add", "--allow-principal", "User:a", "--consumer", "--topic", "x")[0] == 2
    broker.broker.authorizer.delete_acls([AclBindingFilter()])


def test_acls_added_by_the_tool_apply(
    broker: sluice.EmbeddedBroker,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sluice.security.acl import (
        CLUSTER_NAME,
        AccessControlEntry,
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePattern,
        ResourceType,
    )

    assert broker.broker is not None and broker.broker.authorizer is not None
    broker.broker.authorizer.create_acls([
        AclBinding(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME),
                   AccessControlEntry("User:ANONYMOUS", "*", AclOperation.ALTER,
                                      AclPermissionType.ALLOW)),
    ])  # fmt: skip
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    code, _, err = acls(broker, capsys, monkeypatch, "--add", "--allow-principal",
                        "User:ANONYMOUS", "--producer", "--topic", topic)  # fmt: skip
    assert code == 0, err
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda e, _m: errors.append(e))
    producer.flush(15)
    assert errors == [None]  # CREATE let the producer create it, WRITE let it write
    broker.broker.authorizer.delete_acls([AclBindingFilter()])
