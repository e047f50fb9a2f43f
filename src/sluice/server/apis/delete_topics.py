"""DeleteTopics (20): delete topics and their logs.

A single node holds it until its coordinators are built: deleting a topic drops its
committed offsets. The internal topics (``__consumer_offsets``, ``__transaction_state``)
are refused with INVALID_TOPIC_EXCEPTION and a message (the topic admin's rule).

A ``controller_mutation_rate`` quota counts each deleted topic's partitions; from v5
(KIP-599) a topic deleted once the quota is used up is refused with
THROTTLING_QUOTA_EXCEEDED, before that it is deleted and the answer throttled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.log import KafkaStorageException
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.quota import ThrottlingQuotaExceeded
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize
from sluice.server.client_quotas import controller_mutation_quota, mutation_throttle_ms
from sluice.server.messages import build, field
from sluice.server.topics import InvalidTopicError

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.delete_topics.v1.request as v1
    import kio.schema.delete_topics.v2.request as v2
    import kio.schema.delete_topics.v3.request as v3
    import kio.schema.delete_topics.v4.request as v4
    import kio.schema.delete_topics.v5.request as v5
    import kio.schema.delete_topics.v6.request as v6

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v1.DeleteTopicsRequest
        | v2.DeleteTopicsRequest
        | v3.DeleteTopicsRequest
        | v4.DeleteTopicsRequest
        | v5.DeleteTopicsRequest
        | v6.DeleteTopicsRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.DELETE_TOPICS, 1, 6)
STRICT_QUOTA_SINCE = 5


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    cache = ctx.metadata_cache
    names: list[tuple[str | None, Any]] = []
    if field(body, "topics") is not None and request.api_version >= 6:
        for t in field(body, "topics"):
            name = t.name if t.name is not None else cache.topic_name(t.topic_id)
            names.append((name, t.topic_id))
    else:
        names = [(n, None) for n in field(body, "topic_names")]
    responses = []
    quota = controller_mutation_quota(ctx, request, STRICT_QUOTA_SINCE)
    for name, topic_id in names:
        entry: dict[str, Any] = {"name": name, "topic_id": topic_id, "error_message": None}
        if not ctx.config["delete.topic.enable"]:
            entry["error_code"] = ErrorCode.topic_deletion_disabled
        elif name is None:
            entry["error_code"] = ErrorCode.unknown_topic_id
        elif topic_id is not None and not authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name
        ):  # as Kafka: an id it may not describe is not resolved
            entry.update(name=None, error_code=ErrorCode.topic_authorization_failed)
        elif not authorize(ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
            entry["error_code"] = ErrorCode.topic_authorization_failed
        elif not cache.contains_topic(name):
            entry["error_code"] = ErrorCode.unknown_topic_or_partition
        else:
            permits = (cache.num_partitions(name) or 0) if quota is not None else 0
            try:
                if quota is not None:
                    quota.record(permits)
                ctx.topic_admin.delete_topic(name)
                entry["error_code"] = ErrorCode.none
                permits = 0  # taken for good
            except ThrottlingQuotaExceeded as exc:
                entry.update(error_code=ErrorCode.throttling_quota_exceeded, error_message=str(exc))
                permits = 0  # nothing was taken
            except KeyError:  # deleted meanwhile
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
            except InvalidTopicError as exc:  # an internal topic
                entry.update(error_code=ErrorCode.invalid_topic_exception, error_message=str(exc))
            except KafkaStorageException as exc:  # the topic registry's log dir failed
                entry.update(error_code=ErrorCode.kafka_storage_error, error_message=str(exc))
            if quota is not None and permits:
                quota.refund(permits)
        responses.append(entry)
    throttle = mutation_throttle_ms(ctx, quota)
    return build(request.response_type, throttle_time=throttle, responses=responses)
