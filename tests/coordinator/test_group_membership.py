"""GroupCoordinator membership on a manual clock: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, rebalances, session and rebalance timeouts, protocol selection, errors."""

from __future__ import annotations

from sluice.coordinator.group import GroupState
from sluice.protocol import ErrorCode
from support.group_coordinator import Harness, subscription

E = ErrorCode


def test_member_id_required_handshake_then_single_member_leads() -> None:
    h = Harness()
    first = h.join("g", require_known=True)
    assert first[0].error == E.member_id_required
    member_id = first[0].member_id
    assert member_id.startswith("client-")
    assert h.group("g").is_pending_member(member_id)
    joined = h.join("g", member_id, require_known=True)
    r = joined[0]
    assert r.error == E.none and r.generation_id == 1 and r.leader_id == member_id
    assert r.protocol_name == "range" and r.protocol_type == "consumer"
    assert [m.member_id for m in r.members] == [member_id]
    assert h.group("g").is_(GroupState.COMPLETING_REBALANCE)
    synced = h.sync("g", member_id, 1, {member_id: b"a"})
    assert synced[0].error == E.none and synced[0].assignment == b"a"
    assert h.group("g").is_(GroupState.STABLE)
    assert h.heartbeat("g", member_id, 1) == E.none


def test_pending_member_that_never_rejoins_expires() -> None:
    h = Harness()
    member_id = h.join("g", require_known=True, session_ms=5000)[0].member_id
    h.advance(5001)
    assert not h.group("g").is_pending_member(member_id)
    assert h.join("g", member_id)[0].error == E.unknown_member_id


def test_initial_rebalance_delay_waits_for_more_members() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    a = h.join("g", rebalance_ms=10_000)
    h.advance(2000)
    b = h.join("g", rebalance_ms=10_000)
    h.advance(3000)  # at 3000 ms a new member had joined: wait another delay
    assert not a and not b
    h.advance(1001)
    assert a[0].error == b[0].error == E.none
    assert a[0].generation_id == b[0].generation_id == 1
    leader = a[0].leader_id
    assert leader == a[0].member_id
    assert len(a[0].members) == 2 and b[0].members == ()


def test_second_member_triggers_rebalance_and_both_get_assignments() -> None:
    h = Harness()
    a, b = h.stable_group("g", 2)
    g = h.group("g")
    assert g.is_(GroupState.STABLE) and g.generation_id == 2 and g.leader_id == a
    assert g.get(a).assignment == f"assignment-{a}".encode()
    assert h.sync("g", b, 2)[0].assignment == f"assignment-{b}".encode()
    # A third member: the others learn through their heartbeats and rejoin.
    c = h.join("g", client_id="c2")
    assert not c and g.is_(GroupState.PREPARING_REBALANCE)
    assert h.heartbeat("g", a, 2) == E.rebalance_in_progress
    ra, rb = h.join("g", a), h.join("g", b)
    assert ra[0].generation_id == rb[0].generation_id == c[0].generation_id == 3
    assert len(ra[0].members) == 3 and rb[0].members == () and c[0].members == ()
    # Followers that sync first wait for the leader's assignment.
    cs = h.sync("g", c[0].member_id, 3)
    assert not cs
    h.sync("g", a, 3, {a: b"1", b: b"2"})  # c left out: it gets an empty assignment
    assert cs[0].error == E.none and cs[0].assignment == b""
    assert h.sync("g", b, 3)[0].assignment == b"2"


def test_heartbeat_errors() -> None:
    h = Harness()
    (a,) = h.stable_group("g", 1)
    assert h.heartbeat("nope", a, 1) == E.unknown_member_id
    assert h.heartbeat("g", "stranger", 1) == E.unknown_member_id
    assert h.heartbeat("g", a, 7) == E.illegal_generation
    assert h.heartbeat("", a, 1) == E.invalid_group_id
    assert h.heartbeat("g", a, 1) == E.none


def test_sync_errors() -> None:
    h = Harness()
    a, _b = h.stable_group("g", 2)
    assert h.sync("g", a, 1)[0].error == E.illegal_generation
    assert h.sync("g", "stranger", 2)[0].error == E.unknown_member_id
    assert h.sync("nope", a, 2)[0].error == E.unknown_member_id
    h.join("g", client_id="new")
    assert h.sync("g", a, 2)[0].error == E.rebalance_in_progress


def test_invalid_session_timeouts() -> None:
    h = Harness(group_min_session_timeout_ms=6000, group_max_session_timeout_ms=30_000)
    assert h.join("g", session_ms=5999)[0].error == E.invalid_session_timeout
    assert h.join("g", session_ms=30_001)[0].error == E.invalid_session_timeout
    assert h.group("g") is None
    assert h.join("g", session_ms=6000)[0].error == E.none


def test_group_max_size() -> None:
    h = Harness(group_max_size=2)
    h.stable_group("g", 2)
    third = h.join("g", client_id="c3")
    assert third[0].error == E.group_max_size_reached and third[0].member_id == ""
    assert h.group("g").size == 2 and h.group("g").is_(GroupState.STABLE)


def test_rejoin_of_unknown_member_and_empty_group_id() -> None:
    h = Harness()
    assert h.join("nope", "ghost")[0].error == E.unknown_member_id
    assert h.join("")[0].error == E.invalid_group_id


def test_protocol_selection_takes_the_most_voted_common_protocol() -> None:
    h = Harness(group_initial_rebalance_delay_ms=100)
    sub = subscription("t")
    a = h.join("g", protocols=[("range", sub), ("roundrobin", sub), ("sticky", sub)])
    b = h.join("g", protocols=[("roundrobin", sub), ("range", sub)])
    c = h.join("g", protocols=[("roundrobin", sub), ("range", sub)])
    h.advance(100)  # b and c joined during the delay: it runs once more
    assert not a
    h.advance(100)
    assert {r[0].protocol_name for r in (a, b, c)} == {"roundrobin"}
    assert h.group("g").select_protocol() == "roundrobin"


def test_inconsistent_protocols_are_rejected() -> None:
    h = Harness()
    h.stable_group("g", 1)
    assert h.join("g", protocols=[("sticky", b"")])[0].error == E.inconsistent_group_protocol
    assert h.join("g", protocol_type="connect")[0].error == E.inconsistent_group_protocol
    assert h.join("g2", protocols=[])[0].error == E.inconsistent_group_protocol


def test_session_expiry_removes_the_silent_member_and_rebalances() -> None:
    h = Harness()
    a, b = h.stable_group("g", 2, session_ms=3000)
    for _ in range(2):
        h.advance(1000)
        assert h.heartbeat("g", a, 2) == E.none
    assert h.group("g").has(b)
    h.advance(1001)
    assert h.heartbeat("g", a, 2) == E.rebalance_in_progress
    assert not h.group("g").has(b)
    r = h.join("g", a)
    assert r[0].generation_id == 3 and [m.member_id for m in r[0].members] == [a]
    assert h.heartbeat("g", b, 3) == E.unknown_member_id


def test_rebalance_timeout_removes_members_that_do_not_rejoin() -> None:
    h = Harness()
    a, b = h.stable_group("g", 2)
    # b rejoins with new metadata: a rebalance that a never joins, though it heartbeats.
    # The group waits for the largest rebalance timeout of its members (30 s).
    rb = h.join("g", b, protocols=[("range", subscription("t", "u"))], rebalance_ms=5000)
    for _ in range(29):
        h.advance(1000)
        assert h.heartbeat("g", a, 2) == E.rebalance_in_progress
    assert not rb
    for _ in range(2):
        h.advance(1000)
        if h.group("g").has(a):
            assert h.heartbeat("g", a, 2) == E.rebalance_in_progress
    assert rb[0].error == E.none and rb[0].generation_id == 3 and rb[0].leader_id == b
    assert not h.group("g").has(a)


def test_member_that_never_syncs_is_removed_after_the_rebalance_timeout() -> None:
    h = Harness()
    a, b = h.stable_group("g", 2)
    # Rejoining updates the members' timeouts: syncs are awaited 4 s.
    ra, rb = h.join("g", a, rebalance_ms=4000), h.join("g", b, rebalance_ms=4000)
    assert ra and rb
    h.sync("g", a, 3, {a: b"x", b: b"y"})  # b never sends SyncGroup
    h.advance(4001)
    g = h.group("g")
    assert not g.has(b) and g.is_(GroupState.PREPARING_REBALANCE)


def test_leave_group_batch_and_single() -> None:
    h = Harness()
    a, b, c = h.stable_group("g", 3)
    error, errors = h.coordinator.handle_leave_group("g", [(b, None), ("ghost", None)])
    assert error == E.none and errors == [E.none, E.unknown_member_id]
    assert h.group("g").is_(GroupState.PREPARING_REBALANCE)
    assert h.coordinator.handle_leave_group("nope", [(a, None)]) == (E.none, [E.unknown_member_id])
    ra, rc = h.join("g", a), h.join("g", c)
    assert ra[0].generation_id == rc[0].generation_id == 4
    assert h.coordinator.handle_leave_group("g", [(a, None), (c, None)])[1] == [E.none, E.none]
    g = h.group("g")
    assert g.is_(GroupState.EMPTY) and g.generation_id == 5


def test_leaving_during_join_answers_the_waiting_join() -> None:
    h = Harness()
    a, b = h.stable_group("g", 2)
    ra = h.join("g", a)
    assert not ra
    h.coordinator.handle_leave_group("g", [(b, None)])
    assert ra[0].error == E.none and ra[0].generation_id == 3


def test_pending_member_can_leave() -> None:
    h = Harness()
    pending = h.join("g", require_known=True)[0].member_id
    assert h.coordinator.handle_leave_group("g", [(pending, None)])[1] == [E.none]
    assert not h.group("g").is_pending_member(pending)


def test_stable_follower_rejoining_unchanged_gets_current_generation() -> None:
    h = Harness()
    a, b = h.stable_group("g", 2)
    r = h.join("g", b)
    assert r[0].error == E.none and r[0].generation_id == 2 and r[0].members == ()
    assert h.group("g").is_(GroupState.STABLE)
    # The leader rejoining forces a rebalance (metadata it alone watches may have changed).
    assert not h.join("g", a)
    assert h.group("g").is_(GroupState.PREPARING_REBALANCE)


def test_shutdown_answers_waiting_joins_with_not_coordinator() -> None:
    h = Harness()
    a, b = h.stable_group("g", 2)
    waiting = h.join("g", a)
    h.coordinator.shutdown()
    assert waiting[0].error == E.not_coordinator
    assert h.heartbeat("g", b, 2) == E.coordinator_not_available


def test_heartbeat_with_a_stale_generation_during_a_rebalance() -> None:
    h = Harness()
    a, b = h.stable_group("g", 2)
    h.join("g", client_id="c3")
    assert h.heartbeat("g", a, 1) == E.illegal_generation
    assert h.heartbeat("g", b, 2) == E.rebalance_in_progress
