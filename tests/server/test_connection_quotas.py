"""ConnectionQuotas and the connection-limit settings, without sockets: Kafka's
max.connections, max.connections.per.ip and its overrides."""

from __future__ import annotations

import pytest

from sluice.config import BrokerConfig, ConfigError, parse_connection_overrides
from sluice.server.connection_quotas import ConnectionQuotas, normalize_address


def test_an_address_at_its_limit_is_refused_and_nothing_is_counted() -> None:
    quotas = ConnectionQuotas(max_per_ip=2)
    first, second = quotas.try_add("10.0.0.1"), quotas.try_add("10.0.0.1")
    assert first == second == "10.0.0.1"
    assert quotas.try_add("10.0.0.1") is None
    assert quotas.count("10.0.0.1") == 2 and quotas.total == 2
    assert quotas.try_add("10.0.0.2") == "10.0.0.2"  # another address has its own count
    quotas.remove("10.0.0.1")
    assert quotas.try_add("10.0.0.1") == "10.0.0.1"


def test_overrides_replace_the_default_for_their_addresses() -> None:
    quotas = ConnectionQuotas(max_per_ip=0, overrides={"127.0.0.1": 1, "::1": 3})
    assert quotas.try_add("10.0.0.1") is None  # 0: only the listed may connect
    assert quotas.try_add("127.0.0.1") is not None
    assert quotas.try_add("127.0.0.1") is None
    assert quotas.max_for("0:0:0:0:0:0:0:1") == 3


def test_an_ipv4_address_on_a_dual_stack_socket_counts_as_itself() -> None:
    assert normalize_address("::ffff:127.0.0.1") == "127.0.0.1"
    assert normalize_address("fe80::1%eth0") == "fe80::1"
    assert normalize_address("not an address") == "not an address"
    quotas = ConnectionQuotas(max_per_ip=1)
    assert quotas.try_add("::ffff:10.1.1.1") == "10.1.1.1"
    assert quotas.try_add("10.1.1.1") is None


def test_a_slot_freed_below_max_connections_is_announced_once() -> None:
    quotas = ConnectionQuotas(max_connections=2)
    freed: list[int] = []
    quotas.on_slot_free(lambda: freed.append(quotas.total))
    keys = [quotas.try_add("10.0.0.1"), quotas.try_add("10.0.0.2")]
    assert quotas.full
    quotas.remove(keys[0] or "")
    assert freed == [1] and not quotas.full
    quotas.remove(keys[1] or "")
    assert freed == [1]  # not full before: nothing to announce
    quotas.remove("10.0.0.9")  # never counted: ignored
    assert quotas.total == 0


def test_from_config_resolves_host_names() -> None:
    config = BrokerConfig({
        "max.connections": "100", "max.connections.per.ip": "5",
        "max.connections.per.ip.overrides": "localhost:7,[::1]:9,10.0.0.3:0",
    })  # fmt: skip
    quotas = ConnectionQuotas.from_config(config)
    assert quotas.max_connections == 100
    assert quotas.max_for("10.0.0.4") == 5
    assert quotas.max_for("127.0.0.1") == 7
    assert quotas.max_for("10.0.0.3") == 0
    assert quotas.max_for("::1") == 9  # listed after localhost: the later entry wins


def test_kafkas_defaults_are_no_limits() -> None:
    quotas = ConnectionQuotas.from_config(BrokerConfig())
    assert quotas.max_connections == 2**31 - 1 and quotas.max_for("10.0.0.1") == 2**31 - 1


def test_overrides_are_parsed_as_kafka_writes_them() -> None:
    assert parse_connection_overrides("") == {}
    assert parse_connection_overrides(" hostName:100 , 127.0.0.1:200,") == {
        "hostName": 100, "127.0.0.1": 200,
    }  # fmt: skip
    assert parse_connection_overrides("[fe80::1]:3,::2:4") == {"fe80::1": 3, "::2": 4}
    for bad in ("host", "host:", ":3", "host:-1", "host:x"):
        with pytest.raises(ConfigError, match=r"max\.connections\.per\.ip\.overrides"):
            parse_connection_overrides(bad)


def test_the_settings_are_checked_as_kafka_checks_them() -> None:
    with pytest.raises(ConfigError, match=r"max\.connections\.per\.ip can be 0 only"):
        BrokerConfig({"max.connections.per.ip": "0"})
    BrokerConfig({"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "h:1"})
    with pytest.raises(ConfigError, match="invalid entry"):
        BrokerConfig({"max.connections.per.ip.overrides": "h:1,nonsense"})
    with pytest.raises(ConfigError, match=r"queued\.max\.request\.bytes must be at least"):
        BrokerConfig({"queued.max.request.bytes": "1000"})
    BrokerConfig({"queued.max.request.bytes": str(100 << 20)})
    BrokerConfig({"queued.max.request.bytes": "-1"})
    BrokerConfig({"queued.max.request.bytes": "0"})  # 0 or less: no bound, as in Kafka
    with pytest.raises(ConfigError):
        BrokerConfig({"max.connections": "-1"})
