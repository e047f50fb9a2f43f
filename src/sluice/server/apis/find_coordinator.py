"""FindCoordinator (10): which broker coordinates a group or a transactional id (v0-v3
one key, v4+ a batch).

The coordinator of a key is the live leader of the key's partition of the internal topic
(``__consumer_offsets``, ``__transaction_state``), from the metadata cache. A missing
topic is created on first use (its replication factor capped by the live brokers) and
COORDINATOR_NOT_AVAILABLE answered for the client to retry until a leader is known; when
this broker leads the partition, its coordinator must own it too.

Versions 0-6: v5 lets the answer carry TRANSACTION_ABORTABLE (never needed here), v6 adds
share groups (KIP-932), whose key type 2 is answered INVALID_REQUEST as by a Kafka 3.9
broker without share groups enabled. The minimum stays at 0:
librdkafka before 2.11.1 enables the group coordinator, consumer groups and lz4 only if
the range holds v0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.find_coordinator.v0.request as v0
    import kio.schema.find_coordinator.v1.request as v1
    import kio.schema.find_coordinator.v2.request as v2
    import kio.schema.find_coordinator.v3.request as v3
    import kio.schema.find_coordinator.v4.request as v4
    import kio.schema.find_coordinator.v5.request as v5
    import kio.schema.find_coordinator.v6.request as v6

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.FindCoordinatorRequest
        | v1.FindCoordinatorRequest
        | v2.FindCoordinatorRequest
        | v3.FindCoordinatorRequest
        | v4.FindCoordinatorRequest
        | v5.FindCoordinatorRequest
        | v6.FindCoordinatorRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.FIND_COORDINATOR, 0, 6)

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2
NOT_AVAILABLE = "The coordinator is not available."


def _coordinator(ctx: RequestContext, key_type: int, key: str) -> dict[str, Any]:
    from sluice.coordinator.group import GROUP_METADATA_TOPIC_NAME
    from sluice.coordinator.transaction import TRANSACTION_STATE_TOPIC_NAME
    from sluice.server.group_runtime import OFFSETS_TOPIC_CONFIGS
    from sluice.server.txn_runtime import TRANSACTION_TOPIC_CONFIGS

    if key_type == GROUP_KEY_TYPE and not authorize(
        ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key
    ):
        return _error(key, ErrorCode.group_authorization_failed, "")
    if key_type == TRANSACTION_KEY_TYPE and not authorize(
        ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        return _error(key, ErrorCode.transactional_id_authorization_failed, "")
    if key_type == GROUP_KEY_TYPE:
        group = ctx.group_coordinator
        return _leader_of(
            ctx, key, GROUP_METADATA_TOPIC_NAME, group.partition_for(key),
            group.group_manager.num_partitions, ctx.config["offsets.topic.replication.factor"],
            OFFSETS_TOPIC_CONFIGS,
            lambda: group.is_active and group.group_manager.is_group_local(key),
        )  # fmt: skip
    if key_type == TRANSACTION_KEY_TYPE:
        ctx.topic_admin.ensure_transaction_state()
        txn = ctx.txn_coordinator
        return _leader_of(
            ctx, key, TRANSACTION_STATE_TOPIC_NAME, txn.partition_for(key),
            txn.config.num_partitions, ctx.config["transaction.state.log.replication.factor"],
            TRANSACTION_TOPIC_CONFIGS, lambda: txn.is_local(key),
        )  # fmt: skip
    if key_type == SHARE_KEY_TYPE:
        return _error(key, ErrorCode.invalid_request, "Share groups are not enabled.")
    return _error(key, ErrorCode.invalid_request, f"Unknown coordinator key type {key_type}.")


def _leader_of(
    ctx: RequestContext, key: str, topic: str, partition: int, num_partitions: int,
    replication_factor: int, configs: Mapping[str, str], owned_here: Callable[[], bool],
) -> dict[str, Any]:  # fmt: skip
    """The live leader of the key's partition, or COORDINATOR_NOT_AVAILABLE."""
    cache = ctx.metadata_cache
    tp = TopicPartition(topic, partition)
    if not cache.contains_partition(tp):
        ctx.topic_admin.create_internal_topic(
            topic, num_partitions, replication_factor, dict(configs)
        )
    leader = cache.leader(tp)
    ep = leader.endpoint(ctx.session.listener_name) if leader is not None else None
    if leader is None or ep is None:
        return _error(key, ErrorCode.coordinator_not_available, NOT_AVAILABLE)
    if leader.id == ctx.broker_id and not owned_here():
        return _error(key, ErrorCode.coordinator_not_available, NOT_AVAILABLE)
    return {
        "key": key, "node_id": leader.id, "host": ep.host, "port": ep.port,
        "error_code": ErrorCode.none, "error_message": None,
    }  # fmt: skip


def _error(key: str, code: ErrorCode, message: str) -> dict[str, Any]:
    return {
        "key": key, "node_id": -1, "host": "", "port": -1,
        "error_code": code, "error_message": message,
    }  # fmt: skip


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    key_type = int(field(body, "key_type", GROUP_KEY_TYPE))
    if request.api_version >= 4:
        coordinators = [_coordinator(ctx, key_type, key) for key in field(body, "coordinator_keys")]
        return build(request.response_type, throttle_time=0, coordinators=coordinators)
    result = _coordinator(ctx, key_type, field(body, "key"))
    return build(request.response_type, throttle_time=0, **result)
