"""CreatePartitions (37): raise the partition count of existing topics.

New partitions start empty, on the replicas the request's ``assignments`` name for
each (KIP-195, checked as Kafka's controller checks them, INVALID_REPLICA_ASSIGNMENT:
:mod:`sluice.server.replica_assignment`), or else spread over the live brokers as
Kafka's assignment does (a single node: itself). A count that is not larger than the
current one is INVALID_PARTITIONS, one past ``max.broker.partitions``
POLICY_VIOLATION; an internal topic is refused (INVALID_TOPIC_EXCEPTION: its
coordinator maps keys to partitions by the count); ``validate_only`` checks without
changing anything. As for CreateTopics, a single node makes the new partitions' logs on
worker threads and records them once they all exist (KAFKA_STORAGE_ERROR, nothing
added, when they cannot be), and those not done within the request's ``timeout_ms`` are
answered REQUEST_TIMED_OUT while their creation goes on. As Kafka's
``DelayedCreatePartitions``, a topic is answered once this broker's metadata has a
leader for every new partition, or REQUEST_TIMED_OUT (no message, the partitions
added) when ``timeout_ms`` ends first. A request that would add more than
``MAX_PARTITIONS_PER_REQUEST`` (10,000) partitions in all is refused whole, each topic
answered POLICY_VIOLATION, as Kafka's controller refuses it.

A ``controller_mutation_rate`` quota counts the partitions added; from v3 (KIP-599) a
topic grown once the quota is used up is refused with THROTTLING_QUOTA_EXCEEDED, before
that it grows and the answer is throttled.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, TypeAlias

from sluice.log import KafkaStorageException
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.quota import ControllerMutationQuota, ThrottlingQuotaExceeded
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize
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
    import kio.schema.create_partitions.v0.request as v0
    import kio.schema.create_partitions.v1.request as v1
    import kio.schema.create_partitions.v2.request as v2
    import kio.schema.create_partitions.v3.request as v3

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v0.CreatePartitionsRequest
        | v1.CreatePartitionsRequest
        | v2.CreatePartitionsRequest
        | v3.CreatePartitionsRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.CREATE_PARTITIONS, 0, 3, needs_coordinators=False)
STRICT_QUOTA_SINCE = 3


async def _create_within_quota(
    ctx: RequestContext, topic: Any, validate_only: bool, quota: ControllerMutationQuota | None
) -> _Result:
    """Grow the topic if the controller mutation quota lets it: the new partitions are
    taken from the quota first, and given back if the growth is refused."""
    permits = 0 if quota is None or validate_only else _new_partitions(ctx, topic)
    if quota is None or not permits:
        return await _create(ctx, topic, validate_only)
    try:
        quota.record(permits)
    except ThrottlingQuotaExceeded as exc:
        return ErrorCode.throttling_quota_exceeded, str(exc), _NONE
    result = await _create(ctx, topic, validate_only)
    if result[0] != ErrorCode.none:
        quota.refund(permits)
    return result


_NONE = range(0)


_Result: TypeAlias = tuple[ErrorCode, str | None, range]


async def _create(ctx: RequestContext, topic: Any, validate_only: bool) -> _Result:
    """The topic's outcome and the partitions it adds."""
    name, count = topic.name, topic.count
    current = ctx.metadata_cache.num_partitions(name)
    if current is None:
        return ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.", _NONE
    if count == current:
        return ErrorCode.invalid_partitions, f"Topic already has {count} partitions.", _NONE
    assignments = topic.assignments
    if assignments is not None:
        assignments = [[int(b) for b in a.broker_ids] for a in assignments]
    code, message = await _add(ctx, name, count, validate_only, assignments)
    return code, message, range(current, count) if code is ErrorCode.none else _NONE


async def _add(
    ctx: RequestContext,
    name: str,
    count: int,
    validate_only: bool,
    assignments: list[list[int]] | None,
) -> tuple[ErrorCode, str | None]:
    try:
        await ctx.topic_admin.add_partitions_async(name, count, validate_only, assignments)
    except InvalidReplicaAssignment as exc:
        return ErrorCode.invalid_replica_assignment, str(exc)
    except KeyError:  # deleted meanwhile
        return ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
    except InvalidTopicError as exc:  # an internal topic
        return ErrorCode.invalid_topic_exception, str(exc)
    except PolicyViolation as exc:
        return ErrorCode.policy_violation, str(exc)
    except InvalidRequest as exc:
        return ErrorCode.invalid_request, str(exc)
    except KafkaStorageException as exc:  # a log dir failed, or the logs not made
        return ErrorCode.kafka_storage_error, str(exc)
    except ValueError as exc:
        return ErrorCode.invalid_partitions, str(exc)
    return ErrorCode.none, None


def _new_partitions(ctx: RequestContext, topic: Any) -> int:
    current = ctx.metadata_cache.num_partitions(topic.name)
    return 0 if current is None else max(int(topic.count) - current, 0)


def handle(ctx: RequestContext, request: Request) -> Any:
    return _answer(ctx, request)


async def _answer(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    validate_only = bool(field(body, "validate_only", False))
    occurrences = Counter(t.name for t in body.topics)
    results: list[dict[str, Any]] = []
    if sum(_new_partitions(ctx, t) for t in body.topics) > MAX_PARTITIONS_PER_REQUEST:
        results = [{"name": t.name, "error_code": ErrorCode.policy_violation,
                    "error_message": EXCESSIVE_BATCH_MESSAGE} for t in body.topics]  # fmt: skip
        return build(request.response_type, throttle_time=0, results=results)
    quota = controller_mutation_quota(ctx, request, STRICT_QUOTA_SINCE)
    additions: dict[int, asyncio.Task[_Result]] = {}
    for topic in body.topics:
        if occurrences[topic.name] > 1:
            results.append({"name": topic.name, "error_code": ErrorCode.invalid_request,
                            "error_message": "Duplicate topic in request."})  # fmt: skip
            continue
        if not authorize(ctx, AclOperation.ALTER, ResourceType.TOPIC, topic.name):
            results.append({"name": topic.name, "error_code": ErrorCode.topic_authorization_failed,
                            "error_message": None})  # fmt: skip
            continue
        additions[len(results)] = asyncio.ensure_future(
            _create_within_quota(ctx, topic, validate_only, quota)
        )
        results.append({"name": topic.name})
    timeout_ms = ms(body.timeout)
    deadline = time.monotonic() + timeout_ms / 1000
    if additions:
        timeout_s = timeout_ms / 1000 if timeout_ms > 0 else None
        await asyncio.wait(additions.values(), timeout=timeout_s)
    added: dict[str, range] = {}
    for i, task in additions.items():
        if task.done():
            code, message, new = task.result()
            if new:
                added[results[i]["name"]] = new
        else:
            task.cancel()  # the wait only: the creation goes on (the topic admin holds it)
            code = ErrorCode.request_timed_out
            message = f"Not created within {timeout_ms} ms; the creation goes on."
        results[i].update(error_code=code, error_message=message)
    if added and timeout_ms > 0 and not validate_only:
        left_ms = int((deadline - time.monotonic()) * 1000)
        leaderless = await ctx.topic_admin.await_leaders(added, left_ms)
        for result in results:
            if result["name"] in leaderless:  # added, not yet usable: as Kafka
                result.update(error_code=ErrorCode.request_timed_out, error_message=None)
    throttle = mutation_throttle_ms(ctx, quota)
    return build(request.response_type, throttle_time=throttle, results=results)
