"""Handlers called with a request context of another principal than ``User:ANONYMOUS``
(as an authenticated connection's would be), from another host, on a running broker:
the decisions follow the session's principal and the client's address."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)

import sluice
from sluice.protocol import Request
from sluice.protocol.headers import RequestHeader
from sluice.security import KafkaPrincipal, Session
from sluice.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from sluice.server.apis import describe_groups, metadata, produce
from sluice.server.request_context import RequestContext
from support.records import build_batch

Op, RT = AclOperation, ResourceType


@pytest.fixture(scope="module")
def broker() -> Iterator[sluice.EmbeddedBroker]:
    config = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "super.users": "User:admin", "offsets.topic.num.partitions": 1}  # fmt: skip
    with sluice.EmbeddedBroker(config=config) as embedded:
        yield embedded


def _context(broker: sluice.EmbeddedBroker, principal: str, host: str) -> RequestContext:
    assert broker.broker is not None
    session = Session(KafkaPrincipal.parse(principal), "SASL_PLAINTEXT", "SASL_PLAINTEXT")
    return broker.broker.request_context.for_client("test", f"/{host}", session)


def _handle(broker: sluice.EmbeddedBroker, module: Any, ctx: RequestContext, body: Any) -> Any:
    header = RequestHeader(module.API.key, body.__version__, 1, "test", 2)
    result = broker.call(module.handle, ctx, Request(header, body))
    if hasattr(result, "__await__"):  # an Answer or a coroutine: wait on the broker's loop
        import asyncio

        assert broker._loop is not None

        async def wait() -> Any:
            return await result

        result = asyncio.run_coroutine_threadsafe(wait(), broker._loop).result(10)
    return result


def _grant(broker: sluice.EmbeddedBroker, *bindings: AclBinding) -> None:
    assert broker.broker is not None and broker.broker.authorizer is not None
    assert broker.broker.authorizer.create_acls(list(bindings)) == [None] * len(bindings)


def _acl(name: str, op: AclOperation, who: str, host: str = "*",
         rtype: ResourceType = RT.TOPIC) -> AclBinding:  # fmt: skip
    return AclBinding(ResourcePattern(rtype, name, PatternType.LITERAL),
                      AccessControlEntry(who, host, op, AclPermissionType.ALLOW))  # fmt: skip


def _metadata(broker: sluice.EmbeddedBroker, ctx: RequestContext, *names: str) -> dict[str, int]:
    topics = tuple(MetadataRequestTopic(topic_id=None, name=n) for n in names) if names else None
    body = MetadataRequest(topics=topics, allow_auto_topic_creation=False,
                           include_topic_authorized_operations=True)  # fmt: skip
    response = _handle(broker, metadata, ctx, body)
    return {t.name: int(t.error_code) for t in response.topics}


def test_each_principal_and_host_sees_its_own_topics(broker: sluice.EmbeddedBroker) -> None:
    assert broker.broker is not None
    mine, other = f"a-{uuid.uuid4().hex[:6]}", f"b-{uuid.uuid4().hex[:6]}"
    for name in (mine, other):
        broker.call(broker.broker.topic_admin.create_topic, name, 1, 1, {})
    _grant(broker, _acl(mine, Op.DESCRIBE, "User:alice", host="10.1.1.1"))
    alice = _context(broker, "User:alice", "10.1.1.1")
    listed = _metadata(broker, alice)
    assert mine in listed and other not in listed
    assert _metadata(broker, alice, other) == {other: 29}  # TOPIC_AUTHORIZATION_FAILED
    # the same principal from another address, and another principal: nothing
    assert mine not in _metadata(broker, _context(broker, "User:alice", "10.1.1.2"))
    assert mine not in _metadata(broker, _context(broker, "User:bob", "10.1.1.1"))
    # a super user sees everything
    admin = _metadata(broker, _context(broker, "User:admin", "10.9.9.9"))
    assert {mine, other} <= set(admin)


def test_produce_follows_the_principal(broker: sluice.EmbeddedBroker) -> None:
    assert broker.broker is not None
    topic = f"p-{uuid.uuid4().hex[:6]}"
    broker.call(broker.broker.topic_admin.create_topic, topic, 1, 1, {})
    _grant(broker, _acl(topic, Op.WRITE, "User:writer"))

    def code(principal: str, transactional: bool = False) -> int:
        pid = 7 if transactional else -1
        records = build_batch([b"v"], producer_id=pid, producer_epoch=0 if transactional else -1,
                              base_sequence=0 if transactional else -1,
                              transactional=transactional)  # fmt: skip
        body = ProduceRequest(
            transactional_id="tx" if transactional else None, acks=1,
            timeout=datetime.timedelta(seconds=5),
            topic_data=(TopicProduceData(name=topic, partition_data=(
                PartitionProduceData(index=0, records=records),)),),
        )  # fmt: skip
        answer = _handle(broker, produce, _context(broker, principal, "10.0.0.1"), body)
        return _produce_error(answer)

    assert code("User:reader") == 29  # TOPIC_AUTHORIZATION_FAILED
    assert code("User:writer") == 0
    # transactional batches need WRITE on the transactional id first
    assert code("User:writer", transactional=True) == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def _produce_error(answer: Any) -> int:
    """The one partition's error code of an encoded Produce v9 answer."""
    from kio.schema.produce.v9.response import ProduceResponse
    from kio.serial import entity_reader

    data = bytes(answer.body) if hasattr(answer, "body") else bytes(answer)
    response, _ = entity_reader(ProduceResponse)(memoryview(data), 0)
    return int(response.responses[0].partition_responses[0].error_code)


def test_describe_groups_authorized_operations(broker: sluice.EmbeddedBroker) -> None:
    group = f"g-{uuid.uuid4().hex[:6]}"
    _grant(broker, _acl(group, Op.READ, "User:carol", rtype=RT.GROUP))
    body = DescribeGroupsRequest(groups=(group,), include_authorized_operations=True)
    carol = _handle(broker, describe_groups, _context(broker, "User:carol", "h"), body)
    [described] = carol.groups
    assert int(described.error_code) == 0
    assert described.authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
    dave = _handle(broker, describe_groups, _context(broker, "User:dave", "h"), body)
    assert int(dave.groups[0].error_code) == 30  # GROUP_AUTHORIZATION_FAILED
