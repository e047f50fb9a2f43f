"""``sluice configs`` against an embedded broker (in-process through ``sluice.cli.main``),
and its argument parsing on its own."""

from __future__ import annotations

import uuid

import pytest

import sluice
from sluice.cli import main
from sluice.cli.arguments import UsageError
from sluice.cli.configs import java_double, parse_add_config
from sluice.client import Admin, NewTopic


def test_add_config_keeps_bracketed_values_whole() -> None:
    assert parse_add_config("a=1,b=[x=1,y=2],c=") == {"a": "1", "b": "x=1,y=2", "c": ""}
    with pytest.raises(UsageError, match="key=val"):
        parse_add_config("novalue")


@pytest.mark.parametrize(
    ("value", "text"),
    [(1024.0, "1024.0"), (0.5, "0.5"), (1e7, "1.0E7"), (1048576.0, "1048576.0"),
     (12345678.0, "1.2345678E7"), (2.5e-4, "2.5E-4")],
)  # fmt: skip
def test_quota_values_print_as_java_doubles(value: float, text: str) -> None:
    assert java_double(value) == text


def configs(capsys: pytest.CaptureFixture[str], bootstrap: str, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["configs", "--bootstrap-server", bootstrap, *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_user_and_client_quotas(
    broker: sluice.EmbeddedBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    bs = broker.bootstrap_servers
    user = f"u-{uuid.uuid4().hex[:6]}"
    assert configs(capsys, bs, "--alter", "--entity-type", "users", "--entity-name", user,
                   "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152") == (
        0, f"Completed updating config for user {user}.\n", "")  # fmt: skip
    assert configs(capsys, bs, "--alter", "--entity-type", "clients", "--entity-default",
                   "--add-config", "request_percentage=50") == (
        0, "Completed updating default config for clients in the cluster.\n", "")  # fmt: skip
    code, out, _ = configs(capsys, bs, "--alter", "--user", user, "--client", "app",
                           "--add-config", "controller_mutation_rate=10")  # fmt: skip
    assert code == 0
    code, out, _ = configs(capsys, bs, "--describe", "--entity-type", "users",
                           "--entity-name", user)  # fmt: skip
    assert out == (f"Quota configs for user-principal '{user}' are "
                   "consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0\n")  # fmt: skip
    code, out, _ = configs(capsys, bs, "--describe", "--entity-type", "clients")
    assert "Quota configs for the default client-id are request_percentage=50.0\n" in out
    code, out, _ = configs(capsys, bs, "--describe", "--user", user, "--entity-type", "clients")
    assert out == (f"Quota configs for user-principal '{user}', client-id 'app' are "
                   "controller_mutation_rate=10.0\n")  # fmt: skip
    assert configs(capsys, bs, "--alter", "--user", user, "--delete-config",
                   "consumer_byte_rate")[0] == 0  # fmt: skip
    code, out, _ = configs(capsys, bs, "--describe", "--user", user)
    assert out == f"Quota configs for user-principal '{user}' are producer_byte_rate=1048576.0\n"
    with Admin({"bootstrap.servers": bs}) as admin:  # the same through the admin client
        assert admin.describe_client_quotas([("user", 0, user)], strict=True) == [
            ({"user": user}, {"producer_byte_rate": 1048576.0})
        ]


def test_a_user_s_quotas_and_scram_credentials_together(
    broker: sluice.EmbeddedBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    """As kafka-configs: a user's SCRAM credentials are among its configs, set and shown
    beside its quotas (a user with quotas only shows no credentials line)."""
    bs = broker.bootstrap_servers
    user = f"s-{uuid.uuid4().hex[:6]}"
    assert configs(capsys, bs, "--alter", "--user", user, "--add-config",
                   "producer_byte_rate=1024,SCRAM-SHA-256=[iterations=8192,password=pw]") == (
        0, f"Completed updating config for user {user}.\n", "")  # fmt: skip
    assert configs(capsys, bs, "--describe", "--user", user) == (0, (
        f"Quota configs for user-principal '{user}' are producer_byte_rate=1024.0\n"
        f"SCRAM credential configs for user-principal '{user}' are "
        "SCRAM-SHA-256=iterations=8192\n"), "")  # fmt: skip
    assert configs(capsys, bs, "--alter", "--user", user, "--delete-config",
                   "SCRAM-SHA-256")[0] == 0  # fmt: skip
    assert configs(capsys, bs, "--describe", "--user", user) == (
        0,
        f"Quota configs for user-principal '{user}' are producer_byte_rate=1024.0\n",
        "",
    )


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--alter", "--user-defaults", "--add-config", "SCRAM-SHA-512=[password=x]"],
         "SCRAM credentials are set for one named user"),
        (["--alter", "--user", "bob", "--add-config", "retention.ms=1"],
         "Invalid configuration key retention.ms"),
        (["--alter", "--user", "bob", "--add-config", "producer_byte_rate=1.5"],
         "producer_byte_rate must be a LONG value"),
        (["--alter", "--user", "bob", "--add-config", "producer_byte_rate=abc"],
         "Cannot parse quota configuration value for producer_byte_rate: abc"),
        (["--alter", "--user", "bob"], "At least one of --add-config"),
        (["--alter", "--entity-type", "users", "--add-config", "producer_byte_rate=1"],
         "--entity-name or --entity-default must be specified with --alter of users"),
        (["--describe", "--topic", "t", "--user", "u"], "only users and clients"),
        (["--describe"], "an entity is required"),
        (["--alter", "--broker", "0", "--add-config", "broker.id=1"],
         "Cannot update these configs dynamically: Set(broker.id)"),
    ],
)  # fmt: skip
def test_errors(
    broker: sluice.EmbeddedBroker, capsys: pytest.CaptureFixture[str], argv: list[str], error: str
) -> None:
    code, out, err = configs(capsys, broker.bootstrap_servers, *argv)
    assert code != 0 and out == ""
    assert err.startswith("sluice configs: error: ") and error in err, err


def test_topic_and_broker_configs(
    broker: sluice.EmbeddedBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    bs = broker.bootstrap_servers
    topic = f"cfg-{uuid.uuid4().hex[:6]}"
    with Admin({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    assert configs(capsys, bs, "--alter", "--entity-type", "topics", "--entity-name", topic,
                   "--add-config", "retention.ms=60000,cleanup.policy=[compact,delete]") == (
        0, f"Completed updating config for topic {topic}.\n", "")  # fmt: skip
    code, out, _ = configs(capsys, bs, "--describe", "--topic", topic)
    assert out.splitlines() == [
        f"Dynamic configs for topic {topic} are:",
        "  cleanup.policy=compact,delete sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000}",
    ]
    assert (
        configs(capsys, bs, "--alter", "--topic", topic, "--delete-config", "retention.ms")[0] == 0
    )
    code, out, _ = configs(capsys, bs, "--describe", "--topic", topic)
    assert "retention.ms" not in out
    code, out, _ = configs(capsys, bs, "--describe", "--broker", "0", "--all")
    assert code == 0
    assert out.startswith("All configs for broker 0 are:\n")
    assert "  num.partitions=1 sensitive=false" in out
    assert configs(capsys, bs, "--describe", "--entity-type", "brokers") == (
        0, "Dynamic configs for broker 0 are:\n"
        "Default configs for brokers in the cluster are:\n", "")  # fmt: skip
    assert configs(capsys, bs, "--describe", "--broker-defaults") == (
        0, "Default configs for brokers in the cluster are:\n", "")  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--alter", "--topic", "t", "--add-config", "retention.ms=1"],
         "--zookeeper is for users' SCRAM credentials only"),
        (["--alter", "--user-defaults", "--add-config", "SCRAM-SHA-512=[password=x]"],
         "--zookeeper is for users' SCRAM credentials only"),
        (["--alter", "--user", "bob", "--add-config", "producer_byte_rate=1"],
         "with --zookeeper a user's configs are SCRAM-SHA-256, SCRAM-SHA-512"),
        (["--alter", "--user", "bob", "--add-config", "SCRAM-SHA-512=[iterations=10,password=x]"],
         "Invalid SCRAM-SHA-512 iterations 10: from 4096 to 16384"),
        (["--bootstrap-server", "127.0.0.1:9092", "--describe", "--entity-type", "users"],
         "only one of --bootstrap-server and --zookeeper"),
    ],
)  # fmt: skip
def test_zookeeper_is_for_scram_credentials_only(
    capsys: pytest.CaptureFixture[str], argv: list[str], error: str
) -> None:
    """``--zookeeper`` (the way to give brokers their own SCRAM credentials before any of
    them runs; tests/cluster/test_cluster_secure_no_lost_writes.py uses it) refuses
    everything else before connecting anywhere."""
    capsys.readouterr()
    code = main(["configs", "--zookeeper", "127.0.0.1:1", *argv])
    captured = capsys.readouterr()
    assert code != 0 and captured.out == ""
    assert error in captured.err, captured.err
