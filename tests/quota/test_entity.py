"""Quota entities as stored, and AlterClientQuotas / DescribeClientQuotas' checks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.quota import DEFAULT, ClientQuotaEntity, FilterComponent, InvalidRequest
from sluice.quota.entity import (
    CLIENT_ID,
    USER,
    UnsupportedEntityType,
    alter_entity_config,
    desanitize,
    describe_quotas,
    parse_entity,
    sanitize,
)


def test_sanitize_as_kafka() -> None:
    assert sanitize("alice") == "alice"
    assert sanitize("CN=a b,O=x*") == "CN%3Da%20b%2CO%3Dx%2A"
    assert sanitize("a.b-c_d~") == "a.b-c_d%7E"
    assert sanitize("<default>") == "%3Cdefault%3E"  # never the default's name


@given(st.text())
def test_sanitized_names_round_trip_and_are_path_safe(name: str) -> None:
    stored = sanitize(name)
    assert desanitize(stored) == name
    assert "/" not in stored and stored != DEFAULT


@given(
    st.one_of(st.none(), st.text(min_size=1)),
    st.one_of(st.none(), st.text(min_size=1)),
    st.booleans(),
    st.booleans(),
)
def test_entity_paths_round_trip(
    user: str | None, client: str | None, has_user: bool, has_client: bool
) -> None:
    if not (has_user or has_client):
        return
    parts = ([(USER, user)] if has_user else []) + ([(CLIENT_ID, client)] if has_client else [])
    entity = parse_entity(parts)
    assert ClientQuotaEntity.from_path(entity.path) == entity
    assert entity.components() == parts


@pytest.mark.parametrize(
    ("components", "message"),
    [
        ([], "Invalid empty client quota entity"),
        ([(USER, "")], "Empty user not supported"),
        ([("group", "g")], "Unhandled client quota entity type: group"),
        ([(USER, "u"), ("ip", "1.2.3.4")], "Invalid quota entity combination"),
    ],
)
def test_bad_entities_are_invalid_requests(
    components: list[tuple[str, str | None]], message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message):
        parse_entity(components)


def test_alter_sets_removes_and_keeps_other_keys() -> None:
    config = {"SCRAM-SHA-256": "salt=x", "consumer_byte_rate": "5"}
    out = alter_entity_config(
        config,
        [("producer_byte_rate", 1024.0, False), ("request_percentage", 12.5, False),
         ("consumer_byte_rate", 0.0, True)],
    )  # fmt: skip
    assert out == {"SCRAM-SHA-256": "salt=x", "producer_byte_rate": "1024",
                   "request_percentage": "12.5"}  # fmt: skip


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (("retention.ms", 1.0, False), "Invalid configuration key retention.ms"),
        (("producer_byte_rate", 10.5, False), "producer_byte_rate must be a LONG value"),
        (("producer_byte_rate", -1.0, False), "must be a positive number"),
        (("request_percentage", float("nan"), False), "must be a positive number"),
    ],
)
def test_alter_refuses_what_kafka_refuses(op: tuple[str, float, bool], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        alter_entity_config({}, [op])


STORED = {
    ClientQuotaEntity(user="alice"): {"producer_byte_rate": "100"},
    ClientQuotaEntity(user=DEFAULT): {"producer_byte_rate": "50"},
    ClientQuotaEntity(client_id="app"): {"consumer_byte_rate": "10"},
    ClientQuotaEntity(user="alice", client_id="app"): {"request_percentage": "20"},
    ClientQuotaEntity(user="bob"): {"SCRAM-SHA-512": "salt=y"},  # no quota: never described
}


def described(components: list[FilterComponent], strict: bool = False) -> set[str]:
    return {e.path for e in describe_quotas(STORED, components, strict)}


def test_describe_filters_as_kafka() -> None:
    every = {"users/alice", "users/<default>", "clients/app", "users/alice/clients/app"}
    assert described([]) == every
    assert described([], strict=True) == set()
    assert described([FilterComponent(USER, 0, "alice")]) == {
        "users/alice",
        "users/alice/clients/app",
    }
    assert described([FilterComponent(USER, 0, "alice")], strict=True) == {"users/alice"}
    assert described([FilterComponent(USER, 1, None)]) == {"users/<default>"}
    assert described([FilterComponent(USER, 2, None)], strict=True) == {
        "users/alice",
        "users/<default>",
    }
    assert described([FilterComponent(CLIENT_ID, 2, None)]) == {
        "clients/app",
        "users/alice/clients/app",
    }
    assert described([FilterComponent(USER, 0, "alice"), FilterComponent(CLIENT_ID, 0, "app")],
                     strict=True) == {"users/alice/clients/app"}  # fmt: skip


def test_describe_refuses_bad_filters() -> None:
    with pytest.raises(InvalidRequest, match="Duplicate user"):
        describe_quotas(STORED, [FilterComponent(USER, 2, None)] * 2, False)
    with pytest.raises(InvalidRequest, match="Unexpected empty"):
        describe_quotas(STORED, [FilterComponent("", 2, None)], False)
    with pytest.raises(UnsupportedEntityType):
        describe_quotas(STORED, [FilterComponent("group", 2, None)], False)
    with pytest.raises(InvalidRequest, match="match type"):
        describe_quotas(STORED, [FilterComponent(USER, 7, None)], False)
