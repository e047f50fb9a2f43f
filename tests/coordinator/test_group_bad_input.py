"""Bad group requests over a raw connection get Kafka's error codes, and a real consumer
group on the same broker carries on undisturbed. Also the wire forms of FindCoordinator
(v0, v4 batches, transaction keys), OffsetFetch v8 and LeaveGroup v0."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.describe_groups.v5 import request as describe_req
from kio.schema.find_coordinator.v0 import request as find_v0
from kio.schema.find_coordinator.v4 import request as find_v4
from kio.schema.heartbeat.v4 import request as heartbeat_req
from kio.schema.join_group.v5 import request as join_req
from kio.schema.leave_group.v0 import request as leave_v0
from kio.schema.list_groups.v4 import request as list_req
from kio.schema.metadata.v12 import request as metadata_req
from kio.schema.offset_commit.v8 import request as commit_req
from kio.schema.offset_fetch.v8 import request as fetch_req
from kio.schema.sync_group.v5 import request as sync_req
from kio.static.primitive import i8, i32, i64

import sluice
from sluice.protocol import ErrorCode
from support.clients import create_topic, produce
from support.groups import ConsumerThread, committed_offsets
from support.waiting import wait_until
from support.wire import RawClient

E = ErrorCode


def ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def join(group: str, member_id: str = "", session_ms: int = 10_000) -> Any:
    return join_req.JoinGroupRequest(
        group_id=group, session_timeout=ms(session_ms), rebalance_timeout=ms(30_000),
        member_id=member_id, group_instance_id=None, protocol_type="consumer",
        protocols=(join_req.JoinGroupRequestProtocol(name="range", metadata=b""),),
    )  # fmt: skip


def heartbeat(group: str, member_id: str, generation: int) -> Any:
    return heartbeat_req.HeartbeatRequest(
        group_id=group, generation_id=i32(generation), member_id=member_id, group_instance_id=None
    )


def commit(group: str, topic: str, member_id: str, generation: int) -> Any:
    return commit_req.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=i32(generation), member_id=member_id,
        group_instance_id=None,
        topics=(commit_req.OffsetCommitRequestTopic(name=topic, partitions=(
            commit_req.OffsetCommitRequestPartition(
                partition_index=i32(0), committed_offset=i64(1), committed_leader_epoch=i32(-1),
                committed_metadata=None),)),),
    )  # fmt: skip


def commit_errors(reply: Any) -> list[E]:
    return [p.error_code for t in reply.topics for p in t.partitions]


def test_bad_group_requests_get_kafka_errors_without_disturbing_a_live_group(
    broker: sluice.EmbeddedBroker, topic: str, group: str
) -> None:
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, 4)
    live = ConsumerThread(bootstrap, group, topic).start()
    try:
        wait_until(lambda: len(live.owned) == 4, 30, "the live member's assignment")
        produce(bootstrap, topic, [b"x%d" % i for i in range(20)], 4)
        wait_until(lambda: len(live.records) == 20, 30, "20 records")
        member_id, generation = broker.call(_member_and_generation, broker, group)
        client = RawClient(bootstrap)
        try:
            _send_bad_requests(client, topic, group, member_id, generation)
        finally:
            client.close()
        # The live member never noticed.
        produce(bootstrap, topic, [b"y%d" % i for i in range(20)], 4)
        wait_until(lambda: len(live.records) == 40, 30, "20 more records")
        assert broker.call(_member_and_generation, broker, group) == (member_id, generation)
    finally:
        live.stop()
    assert committed_offsets(bootstrap, group, topic, 4) == [10, 10, 10, 10]


def _send_bad_requests(
    client: RawClient, topic: str, group: str, member_id: str, generation: int
) -> None:
    # Commits for unknown groups and generations, and from strangers.
    reply: Any = client.request(commit("no-such-group", topic, "m", 3))
    assert commit_errors(reply) == [E.illegal_generation]
    reply = client.request(commit(group, topic, "stranger", generation))
    assert commit_errors(reply) == [E.unknown_member_id]
    reply = client.request(commit(group, topic, "", -1))
    assert commit_errors(reply) == [E.unknown_member_id]  # simple commits need an empty group
    reply = client.request(commit(group, topic, member_id, generation + 5))
    assert commit_errors(reply) == [E.illegal_generation]
    reply = client.request(commit(group, "no-such-topic", member_id, generation))
    assert commit_errors(reply) == [E.unknown_topic_or_partition]
    # Heartbeats from unknown members, and with a wrong generation.
    assert client.request(heartbeat(group, "stranger", 1)).error_code == E.unknown_member_id  # type: ignore[attr-defined]
    assert client.request(heartbeat("nope", "m", 1)).error_code == E.unknown_member_id  # type: ignore[attr-defined]
    reply = client.request(heartbeat(group, member_id, generation + 5))
    assert reply.error_code == E.illegal_generation
    # Invalid session timeouts, and the v4+ MEMBER_ID_REQUIRED handshake.
    for bad in (999, 1_800_001):
        reply = client.request(join(group + "-other", session_ms=bad))
        assert reply.error_code == E.invalid_session_timeout
    reply = client.request(join(group + "-other"))
    assert reply.error_code == E.member_id_required and reply.member_id
    assert client.request(join("", reply.member_id)).error_code == E.invalid_group_id  # type: ignore[attr-defined]
    reply = client.request(
        sync_req.SyncGroupRequest(
            group_id=group,
            generation_id=i32(generation),
            member_id="stranger",
            group_instance_id=None,
            protocol_type=None,
            protocol_name=None,
            assignments=(),
        )
    )
    assert reply.error_code == E.unknown_member_id


def _member_and_generation(broker: sluice.EmbeddedBroker, group: str) -> tuple[str, int]:
    g = broker.broker.group_coordinator.group_manager.get_group(group)
    return next(iter(g.members)), g.generation_id


def test_find_coordinator_forms(broker: sluice.EmbeddedBroker) -> None:
    client = RawClient(broker.bootstrap_servers)
    try:
        meta: Any = client.request(
            metadata_req.MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        (offsets_topic,) = [t for t in meta.topics if t.name == "__consumer_offsets"]
        assert offsets_topic.is_internal and len(offsets_topic.partitions) == 8
        reply: Any = client.request(find_v0.FindCoordinatorRequest(key="some-group"))
        assert reply.error_code == E.none and reply.port == broker.port
        reply = client.request(
            find_v4.FindCoordinatorRequest(key_type=i8(0), coordinator_keys=("a", "b"))
        )
        assert [(c.key, c.error_code, c.node_id) for c in reply.coordinators] == [
            ("a", E.none, 0),
            ("b", E.none, 0),
        ]
        reply = client.request(
            find_v4.FindCoordinatorRequest(key_type=i8(1), coordinator_keys=("txn",))
        )
        (c,) = reply.coordinators  # the transaction coordinator of a single node is itself
        assert (c.error_code, c.node_id, c.port) == (E.none, 0, broker.port)
        reply = client.request(
            find_v4.FindCoordinatorRequest(key_type=i8(7), coordinator_keys=("x",))
        )
        assert reply.coordinators[0].error_code == E.invalid_request
    finally:
        client.close()


def test_offset_fetch_v8_list_describe_and_leave_v0(
    broker: sluice.EmbeddedBroker, topic: str, group: str
) -> None:
    create_topic(broker.bootstrap_servers, topic, 2)
    client = RawClient(broker.bootstrap_servers)
    try:
        assert commit_errors(client.request(commit(group, topic, "", -1))) == [E.none]
        reply: Any = client.request(
            fetch_req.OffsetFetchRequest(
                groups=(
                    fetch_req.OffsetFetchRequestGroup(group_id=group, topics=None),
                    fetch_req.OffsetFetchRequestGroup(
                        group_id="other",
                        topics=(
                            fetch_req.OffsetFetchRequestTopics(
                                name=topic, partition_indexes=(i32(1),)
                            ),
                        ),
                    ),
                ),
                require_stable=True,
            )
        )
        first, second = reply.groups
        assert first.error_code == E.none
        assert [(t.name, p.partition_index, p.committed_offset) for t in first.topics
                for p in t.partitions] == [(topic, 0, 1)]  # fmt: skip
        assert [p.committed_offset for t in second.topics for p in t.partitions] == [-1]

        member = client.request(join(group + "-j")).member_id  # type: ignore[attr-defined]
        joined: Any = client.request(join(group + "-j", member))
        assert joined.error_code == E.none and joined.leader == member
        reply = client.request(list_req.ListGroupsRequest(states_filter=("CompletingRebalance",)))
        assert [g.group_id for g in reply.groups] == [group + "-j"]
        reply = client.request(
            describe_req.DescribeGroupsRequest(
                groups=(group + "-j", group), include_authorized_operations=True
            )
        )
        states = {g.group_id: (g.group_state, len(g.members)) for g in reply.groups}
        assert states == {group + "-j": ("CompletingRebalance", 1), group: ("Empty", 0)}
        reply = client.request(leave_v0.LeaveGroupRequest(group_id=group + "-j", member_id=member))
        assert reply.error_code == E.none
        reply = client.request(leave_v0.LeaveGroupRequest(group_id=group + "-j", member_id=member))
        assert reply.error_code == E.unknown_member_id
    finally:
        client.close()
