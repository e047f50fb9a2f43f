"""Static membership (KIP-345) on a manual clock: rejoining without a rebalance, fencing
of the old member id, expiry, and the v9 skip-assignment answer for a static leader."""

from __future__ import annotations

from sluice.base import TopicPartition
from sluice.coordinator.group import GroupState
from sluice.protocol import ErrorCode
from support.group_coordinator import Harness, subscription

E = ErrorCode


def static_group(h: Harness, session_ms: int = 10_000) -> tuple[str, str]:
    """Two static members "a" (the leader) and "b", Stable at generation 2."""
    a = h.join("g", instance_id="a", session_ms=session_ms)[0].member_id
    b_join = h.join("g", instance_id="b", session_ms=session_ms)
    a_rejoin = h.join("g", a, instance_id="a", session_ms=session_ms)
    b = b_join[0].member_id
    assert a_rejoin[0].generation_id == b_join[0].generation_id == 2
    assert h.sync("g", a, 2, {a: b"pa", b: b"pb"}, instance_id="a")[0].assignment == b"pa"
    assert h.sync("g", b, 2, instance_id="b")[0].assignment == b"pb"
    assert h.group("g").is_(GroupState.STABLE)
    return a, b


def test_static_member_ids_carry_the_instance_id() -> None:
    h = Harness()
    a, b = static_group(h)
    assert a.startswith("a-") and b.startswith("b-")
    assert h.group("g").static_members == {"a": a, "b": b}


def test_restarted_static_follower_gets_its_assignment_back_without_rebalance() -> None:
    h = Harness()
    a, b = static_group(h)
    h.advance(4000)  # b was restarted: it joins again with no member id
    rejoin = h.join("g", instance_id="b")
    r = rejoin[0]
    assert r.error == E.none and r.member_id != b and r.generation_id == 2
    assert r.leader_id == a and r.members == ()
    g = h.group("g")
    assert g.is_(GroupState.STABLE) and g.generation_id == 2
    assert h.sync("g", r.member_id, 2, instance_id="b")[0].assignment == b"pb"
    assert h.heartbeat("g", a, 2, instance_id="a") == E.none  # the other member saw nothing
    # The old incarnation is fenced.
    assert h.heartbeat("g", b, 2, instance_id="b") == E.fenced_instance_id
    assert h.sync("g", b, 2, instance_id="b")[0].error == E.fenced_instance_id
    tp = TopicPartition("t", 0)
    committed = h.commit("g", {tp: 1}, member_id=b, generation=2, instance_id="b")
    assert committed == [{tp: E.fenced_instance_id}]


def test_restarted_static_leader_is_told_the_old_leader_before_v9() -> None:
    h = Harness()
    a, _b = static_group(h)
    r = h.join("g", instance_id="a")[0]
    # Told the old leader id, so it does not run an assignment a Stable group would ignore.
    assert r.error == E.none and r.leader_id == a and r.member_id != a and r.members == ()
    assert h.group("g").leader_id == r.member_id
    assert h.sync("g", r.member_id, 2, instance_id="a")[0].assignment == b"pa"


def test_restarted_static_leader_skips_assignment_from_v9() -> None:
    h = Harness()
    static_group(h)
    r = h.join("g", instance_id="a", skip_assignment=True)[0]
    assert r.skip_assignment and r.leader_id == r.member_id and len(r.members) == 2
    assert h.group("g").is_(GroupState.STABLE)


def test_rejoin_is_persisted_with_the_new_member_id() -> None:
    h = Harness()
    static_group(h)
    new_b = h.join("g", instance_id="b")[0].member_id
    reloaded = Harness(group_log=h.log)
    g = reloaded.group("g")
    assert g.is_(GroupState.STABLE) and g.static_members["b"] == new_b
    assert g.get(new_b).assignment == b"pb"


def test_static_member_missing_its_session_timeout_is_removed() -> None:
    h = Harness()
    a, b = static_group(h, session_ms=3000)
    for _ in range(3):
        h.advance(1000)
        h.heartbeat("g", a, 2, instance_id="a")
    h.advance(100)
    g = h.group("g")
    assert not g.has(b) and "b" not in g.static_members
    assert g.is_(GroupState.PREPARING_REBALANCE)


def test_static_member_that_does_not_rejoin_a_rebalance_stays_a_member() -> None:
    h = Harness()
    a, b = static_group(h, session_ms=60_000)
    ra = h.join("g", a, instance_id="a", rebalance_ms=2000)
    assert not ra
    h.advance(30_001)  # the rebalance timeout (b's is 30 s) passes without b
    assert ra[0].generation_id == 3 and h.group("g").has(b)


def test_static_member_rejoining_with_protocols_that_change_the_selection_rebalances() -> None:
    h = Harness()
    both = [("range", subscription("t")), ("roundrobin", subscription("t"))]
    a = h.join("g", instance_id="a", protocols=both)[0].member_id
    h.sync("g", a, 1, {a: b"pa"}, instance_id="a")
    assert h.group("g").protocol_name == "range"
    same = h.join("g", instance_id="a", protocols=list(reversed(both)))
    # Its new preference changes the selection: the group rebalances (at once, as the
    # only member has joined) to generation 2 with the new protocol.
    assert same[0].generation_id == 2 and same[0].protocol_name == "roundrobin"
    assert h.group("g").is_(GroupState.COMPLETING_REBALANCE)


def test_static_member_with_an_unchanged_selection_stays_stable() -> None:
    h = Harness()
    static_group(h)
    protocols = [("roundrobin", subscription("t")), ("range", subscription("t"))]
    rejoin = h.join("g", instance_id="b", protocols=protocols)
    # "range" stays the only protocol both support: no rebalance.
    assert rejoin[0].error == E.none and h.group("g").is_(GroupState.STABLE)


def test_leave_by_instance_id_alone() -> None:
    h = Harness()
    static_group(h)
    assert h.coordinator.handle_leave_group("g", [("", "a")]) == (E.none, [E.none])
    assert h.group("g").is_(GroupState.PREPARING_REBALANCE)
    assert "a" not in h.group("g").static_members


def test_static_join_with_unknown_member_id_and_unknown_instance_on_leave() -> None:
    h = Harness()
    static_group(h)
    error, errors = h.coordinator.handle_leave_group("g", [("", "zz"), ("x", "a")])
    assert error == E.none and errors == [E.unknown_member_id, E.fenced_instance_id]


def test_static_rejoin_that_cannot_be_stored_is_undone() -> None:
    h = Harness()
    _a, b = static_group(h)
    h.log.fail_with = E.not_leader_or_follower
    r = h.join("g", instance_id="b")[0]
    assert r.error == E.not_coordinator and r.member_id == ""
    g = h.group("g")
    assert g.static_members["b"] == b and g.has(b) and g.is_(GroupState.STABLE)
    h.log.fail_with = None
    assert h.heartbeat("g", b, 2, instance_id="b") == E.none
