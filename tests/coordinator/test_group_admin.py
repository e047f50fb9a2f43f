"""DescribeGroups, ListGroups, DeleteGroups and OffsetDelete on the sans-I/O coordinator."""

from __future__ import annotations

from sluice.base import TopicPartition
from sluice.coordinator.group import GroupState
from sluice.coordinator.group.records import read_key
from sluice.protocol import ErrorCode
from support.group_coordinator import Harness, subscription

E = ErrorCode
T0, U0 = TopicPartition("t", 0), TopicPartition("u", 0)


def test_describe_stable_rebalancing_and_unknown_groups() -> None:
    h = Harness()
    a, b = h.stable_group("g", 2)
    error, summary = h.coordinator.handle_describe_group("g")
    assert error == E.none and summary.state == "Stable"
    assert summary.protocol_type == "consumer" and summary.protocol == "range"
    assert [m.member_id for m in summary.members] == [a, b]
    assert summary.members[0].metadata == subscription("t")
    assert summary.members[1].assignment == f"assignment-{b}".encode()
    assert summary.members[0].client_id == "c0"
    h.join("g", client_id="c3")
    summary = h.coordinator.handle_describe_group("g")[1]
    assert summary.state == "PreparingRebalance" and summary.protocol == ""
    assert all(m.metadata == b"" and m.assignment == b"" for m in summary.members)
    assert h.coordinator.handle_describe_group("nope") == (
        E.none,
        summary.__class__("Dead", "", "", ()),
    )
    assert h.coordinator.handle_describe_group("")[1].state == "Dead"


def test_list_groups_with_state_and_type_filters() -> None:
    h = Harness()
    h.stable_group("stable", 1)
    h.commit("simple", {T0: 1})
    error, groups = h.coordinator.handle_list_groups()
    assert error == E.none
    assert {(g.group_id, g.protocol_type, g.state) for g in groups} == {
        ("stable", "consumer", "Stable"),
        ("simple", "", "Empty"),
    }
    assert [g.group_id for g in h.coordinator.handle_list_groups(["empty"])[1]] == ["simple"]
    assert [g.group_id for g in h.coordinator.handle_list_groups(["STABLE", "Dead"])[1]] == [
        "stable"
    ]
    assert len(h.coordinator.handle_list_groups(types=["Classic"])[1]) == 2
    assert h.coordinator.handle_list_groups(types=["consumer"])[1] == []


def test_delete_groups() -> None:
    h = Harness()
    (a,) = h.stable_group("busy", 1)
    h.commit("idle", {T0: 1, U0: 2})
    errors = h.coordinator.handle_delete_groups(["busy", "idle", "nope", ""])
    assert errors == {
        "busy": E.non_empty_group,
        "idle": E.none,
        "nope": E.group_id_not_found,
        "": E.group_id_not_found,
    }
    assert h.group("idle") is None and h.fetch("idle", [T0])[1][T0] is None
    records = h.log.records(h.coordinator.partition_for("idle"))
    tombstones = [read_key(k) for k, v in records if v is None and k is not None]
    assert len(tombstones) == 2  # both offsets; a simple group has no metadata record
    assert h.heartbeat("busy", a, 1) == E.none


def test_deleting_a_former_member_group_writes_its_metadata_tombstone() -> None:
    h = Harness()
    (a,) = h.stable_group("g", 1)
    h.coordinator.handle_leave_group("g", [(a, None)])
    assert h.coordinator.handle_delete_groups(["g"]) == {"g": E.none}
    last_key, last_value = h.log.records(h.coordinator.partition_for("g"))[-1]
    assert last_key is not None and last_value is None
    assert read_key(last_key).__class__.__name__ == "GroupMetadataKey"
    assert Harness(group_log=h.log).group("g") is None


def test_offset_delete() -> None:
    h = Harness()
    (a,) = h.stable_group("g", 1, topics=("t",))
    h.commit("g", {T0: 1, U0: 2}, a, 1)
    error, errors = h.coordinator.handle_delete_offsets("g", [T0, U0])
    assert error == E.none
    assert errors == {T0: E.group_subscribed_to_topic, U0: E.none}
    assert set(h.fetch("g")[1]) == {T0}
    assert h.coordinator.handle_delete_offsets("nope", [T0]) == (E.group_id_not_found, {})
    h.coordinator.handle_leave_group("g", [(a, None)])
    assert h.coordinator.handle_delete_offsets("g", [T0]) == (E.none, {T0: E.none})
    # An Empty group left without offsets is gone.
    assert h.group("g") is None


def test_offset_delete_on_a_non_consumer_group_with_members() -> None:
    h = Harness()
    m = h.join("connect", protocol_type="connect", protocols=[("default", b"")])[0].member_id
    h.sync("connect", m, 1, {m: b""})
    assert h.coordinator.handle_delete_offsets("connect", [T0]) == (E.non_empty_group, {})
    assert h.group("connect").is_(GroupState.STABLE)
