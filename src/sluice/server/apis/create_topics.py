"""CreateTopics (19): create topics with partitions, replication and config overrides.

A request that would create more than ``MAX_PARTITIONS_PER_REQUEST`` (10,000) partitions
in all is refused whole, each topic answered POLICY_VIOLATION, as Kafka's controller
refuses an operation of more records than that.

A single node holds it until its coordinators are built: it could otherwise create
``__consumer_offsets`` before the group coordinator does, with another partition count.

An internal topic created here must stay compacted (POLICY_VIOLATION otherwise).

Every check (the name, the counts, the configs, ``max.broker.partitions``: POLICY_VIOLATION)
is made before anything is written. A single node then makes the partition logs on
worker threads and registers the topic once they all exist: a failure (no space, a log
dir offline) answers KAFKA_STORAGE_ERROR and leaves nothing behind. The topics of a
request are created together; as in Kafka, those not done within the request's
``timeout_ms`` are answered REQUEST_TIMED_OUT while their creation goes on. A
``timeout_ms`` of 0 or less waits for the creation: Kafka answers at once then, but
Sluice registers a topic only once it is created.

As Kafka's ``DelayedCreatePartitions``, a created topic is answered only once this
broker's metadata has a leader for each of its partitions (a single node has published
them when the creation returns; in a cluster the controller's UpdateMetadata brings
them), or, when ``timeout_ms`` ends first, REQUEST_TIMED_OUT with no message (the topic
exists). ``validate_only`` answers at once.

``assignments`` (KIP-195) give each partition's replicas instead of the counts, which
must then be -1 (INVALID_REQUEST); they are checked as Kafka's controller checks them
(INVALID_REPLICA_ASSIGNMENT: :mod:`sluice.server.replica_assignment`) and honoured, on a
single node (whose only registered broker is itself) and in a cluster (written to the
topic's ZooKeeper znode, the controller creating each replica where it is assigned).

A ``controller_mutation_rate`` quota counts each created topic's partitions; from v6
(KIP-599) a topic asked for once the quota is used up is refused with
THROTTLING_QUOTA_EXCEEDED, before that it is created and the answer throttled.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from sluice.config import ConfigError, format_config_value
from sluice.log import KafkaStorageException, LogError
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.quota import ControllerMutationQuota, ThrottlingQuotaExceeded
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import (
    AclOperation,
    ResourceType,
    authorize,
    authorize_cluster,
)
from sluice.server.client_quotas import controller_mutation_quota, mutation_throttle_ms
from sluice.server.messages import build, field, ms
from sluice.server.topics import (
    EXCESSIVE_BATCH_MESSAGE,
    MAX_PARTITIONS_PER_REQUEST,
    InvalidReplicaAssignment,
    InvalidRequest,
    InvalidTopicError,
    PolicyViolation,
)

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.create_topics.v2.request as v2
    import kio.schema.create_topics.v3.request as v3
    import kio.schema.create_topics.v4.request as v4
    import kio.schema.create_topics.v5.request as v5
    import kio.schema.create_topics.v6.request as v6
    import kio.schema.create_topics.v7.request as v7

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v2.CreateTopicsRequest
        | v3.CreateTopicsRequest
        | v4.CreateTopicsRequest
        | v5.CreateTopicsRequest
        | v6.CreateTopicsRequest
        | v7.CreateTopicsRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.CREATE_TOPICS, 2, 7)
STRICT_QUOTA_SINCE = 6


async def _create_within_quota(
    ctx: RequestContext, topic: Any, validate_only: bool, quota: ControllerMutationQuota | None
) -> dict[str, Any]:
    """Create the topic if the controller mutation quota lets it: its partitions are
    taken from the quota first, and given back if the creation is refused."""
    permits = 0 if quota is None or validate_only else _partitions(ctx, topic)
    if quota is None or not permits:
        return await _create(ctx, topic, validate_only)
    try:
        quota.record(permits)
    except ThrottlingQuotaExceeded as exc:
        return {"name": topic.name, "error_code": ErrorCode.throttling_quota_exceeded,
                "error_message": str(exc)}  # fmt: skip
    result = await _create(ctx, topic, validate_only)
    if result["error_code"] != ErrorCode.none:
        quota.refund(permits)
    return result


async def _create(ctx: RequestContext, topic: Any, validate_only: bool) -> dict[str, Any]:
    name = topic.name
    result: dict[str, Any] = {"name": name, "error_code": ErrorCode.none, "error_message": None}
    assignments = [(int(a.partition_index), [int(b) for b in a.broker_ids])
                   for a in topic.assignments]  # fmt: skip
    configs = {c.name: c.value for c in topic.configs}
    try:
        info = await ctx.topic_admin.create_topic_async(
            name, topic.num_partitions, topic.replication_factor, configs, validate_only,
            assignments,
        )  # fmt: skip
    except InvalidReplicaAssignment as exc:
        result.update(error_code=ErrorCode.invalid_replica_assignment, error_message=str(exc))
    except InvalidRequest as exc:
        result.update(error_code=ErrorCode.invalid_request, error_message=str(exc))
    except FileExistsError as exc:
        result.update(error_code=ErrorCode.topic_already_exists, error_message=str(exc))
    except InvalidTopicError as exc:
        result.update(error_code=ErrorCode.invalid_topic_exception, error_message=str(exc))
    except KafkaStorageException as exc:  # a log dir is offline, or the logs not made
        result.update(error_code=ErrorCode.kafka_storage_error, error_message=str(exc))
    except (ConfigError, LogError) as exc:
        result.update(error_code=ErrorCode.invalid_config, error_message=str(exc))
    except PolicyViolation as exc:
        result.update(error_code=ErrorCode.policy_violation, error_message=str(exc))
    except ValueError as exc:
        code = (
            ErrorCode.invalid_replication_factor
            if "eplication" in str(exc)
            else ErrorCode.invalid_partitions
        )
        result.update(error_code=code, error_message=str(exc))
    else:
        result.update(
            topic_id=info.topic_id,
            num_partitions=info.num_partitions,
            replication_factor=len(next(iter(info.assignment.values()))),
            configs=[
                {"name": k, "value": format_config_value(v),
                 "read_only": False, "config_source": 5, "is_sensitive": False}
                for k, v in sorted(ctx.topic_admin.topic_configs(name).items()) if v is not None
            ],
        )  # fmt: skip
    return result


def _may_create(ctx: RequestContext, name: str) -> bool:
    """As Kafka: CREATE on the cluster, or on the topic."""
    return authorize_cluster(ctx, AclOperation.CREATE) or authorize(
        ctx, AclOperation.CREATE, ResourceType.TOPIC, name
    )


def _configs_if_authorized(ctx: RequestContext, result: dict[str, Any]) -> dict[str, Any]:
    """As Kafka: the new topic's configs only with DESCRIBE_CONFIGS on it."""
    if "configs" in result and not authorize(
        ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, result["name"]
    ):
        result.update(configs=None, topic_config_error_code=ErrorCode.topic_authorization_failed)
    return result


def _partitions(ctx: RequestContext, topic: Any) -> int:
    """The partitions ``topic`` asks for (the broker's default for -1)."""
    if topic.assignments:
        return len(topic.assignments)
    if topic.num_partitions == -1:
        return int(ctx.config["num.partitions"])
    return max(int(topic.num_partitions), 0)


def handle(ctx: RequestContext, request: Request) -> Any:
    return _answer(ctx, request)


async def _answer(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    validate_only = bool(field(body, "validate_only", False))
    seen: set[str] = set()
    results: list[dict[str, Any]] = []
    if sum(_partitions(ctx, topic) for topic in body.topics) > MAX_PARTITIONS_PER_REQUEST:
        results = [{"name": t.name, "error_code": ErrorCode.policy_violation,
                    "error_message": EXCESSIVE_BATCH_MESSAGE} for t in body.topics]  # fmt: skip
        return build(request.response_type, throttle_time=0, topics=results)
    quota = controller_mutation_quota(ctx, request, STRICT_QUOTA_SINCE)
    creations: dict[int, asyncio.Task[dict[str, Any]]] = {}
    for topic in body.topics:
        if topic.name in seen:
            results.append({"name": topic.name, "error_code": ErrorCode.invalid_request,
                            "error_message": "Duplicate topic in request"})  # fmt: skip
            continue
        seen.add(topic.name)
        if not _may_create(ctx, topic.name):
            results.append({"name": topic.name, "error_code": ErrorCode.topic_authorization_failed,
                            "error_message": "Authorization failed."})  # fmt: skip
            continue
        # Each one's checks run when its task starts, in the request's order.
        creations[len(results)] = asyncio.ensure_future(
            _create_within_quota(ctx, topic, validate_only, quota)
        )
        results.append({"name": topic.name})
    if creations:
        timeout_ms = ms(body.timeout)
        deadline = time.monotonic() + timeout_ms / 1000
        timeout_s = timeout_ms / 1000 if timeout_ms > 0 else None
        await asyncio.wait(creations.values(), timeout=timeout_s)
        for i, task in creations.items():
            if task.done():
                results[i] = _configs_if_authorized(ctx, task.result())
                continue
            task.cancel()  # the wait only: the creation goes on (the topic admin holds it)
            results[i].update(
                error_code=ErrorCode.request_timed_out,
                error_message=f"Not created within {timeout_ms} ms; the creation goes on.",
            )
        created = {r["name"]: range(r["num_partitions"]) for r in results
                   if "num_partitions" in r and r["error_code"] == ErrorCode.none}  # fmt: skip
        if created and timeout_ms > 0 and not validate_only:
            left_ms = int((deadline - time.monotonic()) * 1000)
            leaderless = await ctx.topic_admin.await_leaders(created, left_ms)
            for result in results:
                if result["name"] in leaderless:  # created, not yet usable: as Kafka
                    result.update(error_code=ErrorCode.request_timed_out, error_message=None)
    throttle = mutation_throttle_ms(ctx, quota)
    return build(request.response_type, throttle_time=throttle, topics=results)
