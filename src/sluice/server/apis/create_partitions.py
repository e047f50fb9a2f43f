"""CreatePartitions (37): raise the partition count of existing topics.

New partitions are placed on this broker and start empty. Manual assignments are not
supported yet (INVALID_REQUEST); a count that is not larger than the current one is
INVALID_PARTITIONS; an internal topic is refused (INVALID_TOPIC_EXCEPTION: its
coordinator maps keys to partitions by the count); ``validate_only`` checks without
changing anything. A request that would add more than ``MAX_PARTITIONS_PER_REQUEST``
(10,000) partitions in all is refused whole, each topic answered POLICY_VIOLATION, as
Kafka's controller refuses it.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from sluice.log import KafkaStorageException
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.messages import build, field
from sluice.server.topics import (
    EXCESSIVE_BATCH_MESSAGE,
    MAX_PARTITIONS_PER_REQUEST,
    InvalidTopicError,
)

if TYPE_CHECKING:
    from typing import TypeAlias

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


def _create(ctx: RequestContext, topic: Any, validate_only: bool) -> tuple[ErrorCode, str | None]:
    name, count = topic.name, topic.count
    current = ctx.metadata_cache.num_partitions(name)
    if current is None:
        return ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
    if field(topic, "assignments"):
        return ErrorCode.invalid_request, "Manual partition assignment is not supported yet"
    if count == current:
        return ErrorCode.invalid_partitions, f"Topic already has {count} partitions."
    try:
        ctx.topic_admin.add_partitions(name, count, validate_only)
    except KeyError:  # deleted meanwhile
        return ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
    except InvalidTopicError as exc:  # an internal topic
        return ErrorCode.invalid_topic_exception, str(exc)
    except KafkaStorageException as exc:  # the topic registry's log dir failed
        return ErrorCode.kafka_storage_error, str(exc)
    except ValueError as exc:
        return ErrorCode.invalid_partitions, str(exc)
    return ErrorCode.none, None


def _new_partitions(ctx: RequestContext, topic: Any) -> int:
    current = ctx.metadata_cache.num_partitions(topic.name)
    return 0 if current is None else max(int(topic.count) - current, 0)


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    validate_only = bool(field(body, "validate_only", False))
    occurrences = Counter(t.name for t in body.topics)
    results = []
    if sum(_new_partitions(ctx, t) for t in body.topics) > MAX_PARTITIONS_PER_REQUEST:
        results = [{"name": t.name, "error_code": ErrorCode.policy_violation,
                    "error_message": EXCESSIVE_BATCH_MESSAGE} for t in body.topics]  # fmt: skip
        return build(request.response_type, throttle_time=0, results=results)
    for topic in body.topics:
        if occurrences[topic.name] > 1:
            code: ErrorCode = ErrorCode.invalid_request
            message: str | None = "Duplicate topic in request."
        else:
            code, message = _create(ctx, topic, validate_only)
        results.append({"name": topic.name, "error_code": code, "error_message": message})
    return build(request.response_type, throttle_time=0, results=results)
