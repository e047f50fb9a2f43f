"""Fetch (1): read record batches, long-polling through the fetch purgatory, with sessions.

Versions 4-17. From v13 topics are named by id (KIP-516): each id is resolved through the
metadata cache, a partition of an id the broker does not know (or whose topic was
recreated under a new id since the fetch session learnt it) is answered
UNKNOWN_TOPIC_ID, and the answer names topics by id. v15 moves the replica id into
ReplicaState; v16 adds, for a partition answered NOT_LEADER_OR_FOLLOWER or
FENCED_LEADER_EPOCH, its current leader and epoch and that leader's endpoint (KIP-951);
v17's replica directory id is for KRaft JBOD followers and is not used. The minimum
stays at 4: librdkafka before 2.11.1 enables the v2 record format only if the range
holds v4, and zstd only if it holds v10.

A consumer's ``consumer_byte_rate`` bounds what one Fetch may return (ten windows of its
quota, Kafka's ``getMaxValueInQuotaWindow``); a Fetch that takes the consumer over its
quota is answered empty with ``throttle_time_ms`` (its bytes not counted, as Kafka
unrecords them) and the connection is muted that long. Followers' fetches are not
subject to client quotas.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import typing
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from sluice.base import TopicPartition
from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.protocol.throttle import with_throttle_time
from sluice.quota import ClientQuotaManager
from sluice.replication.fetch_session import INVALID_SESSION_ID, FetchContext, PartitionState
from sluice.replication.partition import FetchIsolation
from sluice.replication.replica_manager import FetchParams, FetchPartitionData, PartitionFetch
from sluice.server.answer import Answer
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import (
    AclOperation,
    ResourceType,
    authorize_cluster,
    filter_by_authorized,
)
from sluice.server.messages import build, field, ms

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.fetch.v4.request as v4
    import kio.schema.fetch.v5.request as v5
    import kio.schema.fetch.v6.request as v6
    import kio.schema.fetch.v7.request as v7
    import kio.schema.fetch.v8.request as v8
    import kio.schema.fetch.v9.request as v9
    import kio.schema.fetch.v10.request as v10
    import kio.schema.fetch.v11.request as v11
    import kio.schema.fetch.v12.request as v12
    import kio.schema.fetch.v13.request as v13
    import kio.schema.fetch.v14.request as v14
    import kio.schema.fetch.v15.request as v15
    import kio.schema.fetch.v16.request as v16
    import kio.schema.fetch.v17.request as v17

    from sluice.replication.metadata_cache import MetadataCache
    from sluice.server.request_context import RequestContext

    Body: TypeAlias = (
        v4.FetchRequest
        | v5.FetchRequest
        | v6.FetchRequest
        | v7.FetchRequest
        | v8.FetchRequest
        | v9.FetchRequest
        | v10.FetchRequest
        | v11.FetchRequest
        | v12.FetchRequest
        | v13.FetchRequest
        | v14.FetchRequest
        | v15.FetchRequest
        | v16.FetchRequest
        | v17.FetchRequest
    )

API: ApiSpec[Body] = ApiSpec(ApiKey.FETCH, 4, 17, needs_coordinators=False)

TOPIC_IDS_VERSION = 13
REPLICA_STATE_VERSION = 15
CURRENT_LEADER_VERSION = 16
_NEEDS_LEADER = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})


class Unresolved(NamedTuple):
    """Partitions of a topic id this broker does not know: answered UNKNOWN_TOPIC_ID."""

    topic_id: object
    partitions: list[int]


SENDFILE_MIN_BYTES = 64 * 1024


def _topic_names(cache: MetadataCache, ids: list[uuid.UUID | None]) -> dict[Any, str]:
    """The known topics among ``ids``, by id."""
    found = {i: cache.topic_name(i) for i in ids}
    return {i: n for i, n in found.items() if n is not None}


def _context(
    ctx: RequestContext, request: Request, replica_id: int
) -> tuple[FetchContext, list[Unresolved]]:
    body = API.body(request)
    by_id = request.api_version >= TOPIC_IDS_VERSION
    names: dict[Any, str] = {}
    if by_id:
        ids = [field(t, "topic_id") for t in body.topics]
        ids += [field(t, "topic_id") for t in field(body, "forgotten_topics_data", ())]
        names = _topic_names(ctx.metadata_cache, ids)
    partitions: dict[TopicPartition, PartitionState] = {}
    unresolved: list[Unresolved] = []
    for topic in body.topics:
        topic_id = field(topic, "topic_id") if by_id else None
        name = names.get(topic_id) if by_id else field(topic, "topic")
        if name is None:
            unresolved.append(Unresolved(topic_id, [p.partition for p in topic.partitions]))
            continue
        for p in topic.partitions:
            partitions[TopicPartition(name, p.partition)] = PartitionState(
                p.fetch_offset, p.partition_max_bytes,
                field(p, "current_leader_epoch", -1), field(p, "log_start_offset", -1),
                topic_id,
            )  # fmt: skip
    if request.api_version < 7:
        return FetchContext(partitions), unresolved
    forgotten: list[TopicPartition] = []
    for t in field(body, "forgotten_topics_data", ()):
        if not by_id:
            forgotten += [TopicPartition(field(t, "topic"), p) for p in t.partitions]
            continue
        topic_id = field(t, "topic_id")
        name = names.get(topic_id)
        if name is None:  # a topic deleted since: its name as the session knew it
            name = _session_topic_name(ctx, field(body, "session_id"), topic_id)
        if name is not None:  # not a partition this request adds under another id
            forgotten += [
                tp for p in t.partitions
                if (tp := TopicPartition(name, p)) not in partitions
                or partitions[tp].topic_id == topic_id
            ]  # fmt: skip
    context = ctx.fetch_sessions.new_context(
        field(body, "session_id"), field(body, "session_epoch"), partitions, forgotten,
        privileged=replica_id >= 0, now_ms=ctx.clock.hi_res_clock_ms(),
    )  # fmt: skip
    return context, unresolved


def _session_topic_name(ctx: RequestContext, session_id: int, topic_id: object) -> str | None:
    """The name under which the fetch session holds partitions of ``topic_id``."""
    session = ctx.fetch_sessions.sessions.get(session_id)
    if session is None:
        return None
    return next(
        (tp.topic for tp, c in session.partitions.items() if c.state.topic_id == topic_id), None
    )


def _replica_id(request: Request) -> int:
    body = API.body(request)
    if request.api_version >= REPLICA_STATE_VERSION:
        return int(field(body, "replica_state").replica_id)
    return int(field(body, "replica_id"))


def _response(
    request: Request,
    context: FetchContext,
    results: list[tuple[PartitionFetch, FetchPartitionData]],
    unresolved: Sequence[Unresolved] = (),
    cache: MetadataCache | None = None,
) -> Any:
    """The FetchResponse for ``results``: kio's classes filled in directly (the general
    :func:`build` converts every field of every entity by its schema type, a large share of
    a Fetch's Python time); any other shape of response class, and the rare answers with
    unknown topic ids or leaders to name (v16+), go through ``build``."""
    shapes = _shapes_of(request.response_type)
    if (
        shapes is None
        or unresolved
        or (
            request.api_version >= CURRENT_LEADER_VERSION
            and any(data.error in _NEEDS_LEADER for _, data in results)
        )
    ):
        return _response_general(request, context, results, unresolved, cache)
    partition_cls, aborted_cls = shapes.partition, shapes.aborted
    topics: dict[str, list[Any]] = {}
    for fetch, data in results:
        size, records = _records_of(data)
        if not context.include(
            fetch.tp, data.error, data.high_watermark, data.last_stable_offset,
            data.log_start_offset, size,
        ):  # fmt: skip
            continue
        aborted = data.aborted_transactions
        fields: dict[str, Any] = {
            "partition_index": fetch.tp.partition,
            "error_code": data.error,
            "high_watermark": data.high_watermark,
            "aborted_transactions": None if aborted is None else _aborted(aborted_cls, aborted),
            "records": records,
        }
        if shapes.last_stable_offset:
            fields["last_stable_offset"] = data.last_stable_offset
        if shapes.log_start_offset:
            fields["log_start_offset"] = data.log_start_offset
        if shapes.preferred_read_replica:
            fields["preferred_read_replica"] = -1
        topics.setdefault(fetch.tp.topic, []).append(partition_cls(**fields))
    topic_cls = shapes.topic
    if shapes.by_id:
        states = context.partitions
        responses = tuple(
            topic_cls(topic_id=states[TopicPartition(t, ps[0].partition_index)].topic_id,
                      partitions=tuple(ps))
            for t, ps in topics.items()
        )  # fmt: skip
    else:
        responses = tuple(topic_cls(topic=t, partitions=tuple(ps)) for t, ps in topics.items())
    if shapes.session:
        return shapes.response(
            throttle_time=_NO_THROTTLE, error_code=context.error,
            session_id=context.session_id, responses=responses,
        )  # fmt: skip
    return shapes.response(throttle_time=_NO_THROTTLE, responses=responses)


def _aborted(cls: Any, aborted: list[Any]) -> tuple[Any, ...]:
    return tuple(cls(producer_id=t.producer_id, first_offset=t.first_offset) for t in aborted)


def _records_of(data: FetchPartitionData) -> tuple[int, Any]:
    """The slice's size and what the response carries: large slices go out with sendfile,
    straight from the segment file; small ones are read into bytes."""
    records = data.records
    if records is None:
        return 0, b""
    size = records.size
    if size >= SENDFILE_MIN_BYTES:
        return size, records
    return size, records.read() if size else b""


_NO_THROTTLE = datetime.timedelta(0)


class _Shapes(NamedTuple):
    """kio's FetchResponse classes of one version and which optional fields it has."""

    response: Any
    topic: Any
    partition: Any
    aborted: Any
    session: bool
    last_stable_offset: bool
    log_start_offset: bool
    preferred_read_replica: bool
    by_id: bool


_shapes: dict[type, _Shapes | None] = {}


def _shapes_of(response_type: type) -> _Shapes | None:
    if response_type not in _shapes:
        _shapes[response_type] = _make_shapes(response_type)
    return _shapes[response_type]


def _make_shapes(response_type: type) -> _Shapes | None:
    """The classes under ``response_type``, or None if its shape is not the one
    :func:`_response` fills (topic names or ids, the partition fields of v4-v17)."""

    def names(cls: type) -> set[str]:
        return {f.name for f in dataclasses.fields(cls)}

    def element(cls: type, name: str) -> Any:
        hint = typing.get_type_hints(cls)[name]
        for arg in typing.get_args(hint):
            if dataclasses.is_dataclass(arg):
                return arg
            inner = [a for a in typing.get_args(arg) if dataclasses.is_dataclass(a)]
            if inner:
                return inner[0]
        return None

    top = names(response_type)
    topic = element(response_type, "responses")
    if topic is None or names(topic) not in ({"topic", "partitions"}, {"topic_id", "partitions"}):
        return None
    partition = element(topic, "partitions")
    if partition is None:
        return None
    fields = names(partition)
    base = {"partition_index", "error_code", "high_watermark", "aborted_transactions", "records"}
    optional = {"last_stable_offset", "log_start_offset", "preferred_read_replica"}
    tagged = {"diverging_epoch", "current_leader", "snapshot_id"}  # defaults: none sent
    if not base <= fields or fields - base - optional - tagged:
        return None
    aborted = element(partition, "aborted_transactions")
    if aborted is None or names(aborted) != {"producer_id", "first_offset"}:
        return None
    if top - {"throttle_time", "error_code", "session_id", "responses", "node_endpoints"}:
        return None
    return _Shapes(
        response_type, topic, partition, aborted, "session_id" in top,
        "last_stable_offset" in fields, "log_start_offset" in fields,
        "preferred_read_replica" in fields, "topic_id" in names(topic),
    )  # fmt: skip


def _response_general(
    request: Request,
    context: FetchContext,
    results: list[tuple[PartitionFetch, FetchPartitionData]],
    unresolved: Sequence[Unresolved] = (),
    cache: MetadataCache | None = None,
) -> Any:
    """The FetchResponse through the general :func:`build` (what :func:`_response` must
    equal; tests compare them)."""
    by_id = request.api_version >= TOPIC_IDS_VERSION
    name_leaders = request.api_version >= CURRENT_LEADER_VERSION and cache is not None
    topics: dict[str, list[dict[str, Any]]] = {}
    leaders: dict[int, Any] = {}
    for fetch, data in results:
        size = data.records.size if data.records is not None else 0
        # Large slices go out with sendfile, straight from the segment file.
        records: Any = (
            data.records
            if size >= SENDFILE_MIN_BYTES
            else (data.records.read() if data.records is not None and size else b"")
        )
        if not context.include(
            fetch.tp, data.error, data.high_watermark, data.last_stable_offset,
            data.log_start_offset, size,
        ):  # fmt: skip
            continue
        entry = {
            "partition_index": fetch.tp.partition,
            "error_code": data.error,
            "high_watermark": data.high_watermark,
            "last_stable_offset": data.last_stable_offset,
            "log_start_offset": data.log_start_offset,
            "aborted_transactions": None
            if data.aborted_transactions is None
            else [
                {"producer_id": t.producer_id, "first_offset": t.first_offset}
                for t in data.aborted_transactions
            ],
            "preferred_read_replica": -1,
            "records": records,
        }
        if name_leaders and data.error in _NEEDS_LEADER:
            assert cache is not None
            entry["current_leader"] = _current_leader(cache, fetch.tp, leaders)
        topics.setdefault(fetch.tp.topic, []).append(entry)
    responses: list[dict[str, Any]] = []
    for t, ps in topics.items():
        if by_id:
            topic_id = context.partitions[TopicPartition(t, ps[0]["partition_index"])].topic_id
            responses.append({"topic_id": topic_id, "partitions": ps})
        else:
            responses.append({"topic": t, "partitions": ps})
    for topic_id, indexes in unresolved:
        responses.append({"topic_id": topic_id, "partitions": [
            {"partition_index": p, "error_code": ErrorCode.unknown_topic_id,
             "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
             "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}
            for p in indexes
        ]})  # fmt: skip
    return build(
        request.response_type,
        throttle_time=0,
        error_code=context.error,
        session_id=context.session_id,
        responses=responses,
        node_endpoints=[
            {
                "node_id": b.id,
                "host": b.endpoints[0].host,
                "port": b.endpoints[0].port,
                "rack": b.rack,
            }
            for b in leaders.values()
            if b.endpoints
        ],
    )


def _authorized(
    ctx: RequestContext, replica_id: int, fetches: list[PartitionFetch]
) -> tuple[list[PartitionFetch], list[tuple[PartitionFetch, FetchPartitionData]]]:
    """As Kafka: a follower needs CLUSTER_ACTION on the cluster, a consumer READ on each
    topic; the others are answered TOPIC_AUTHORIZATION_FAILED."""
    if replica_id >= 0:
        allowed = authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
        readable = {f.tp.topic for f in fetches} if allowed else set()
    else:
        readable = filter_by_authorized(
            ctx, AclOperation.READ, ResourceType.TOPIC, (f.tp.topic for f in fetches)
        )
    denied = FetchPartitionData(ErrorCode.topic_authorization_failed)
    return (
        [f for f in fetches if f.tp.topic in readable],
        [(f, denied) for f in fetches if f.tp.topic not in readable],
    )


def _current_leader(cache: MetadataCache, tp: TopicPartition, leaders: dict[int, Any]) -> Any:
    """KIP-951: the partition's leader and epoch as this broker knows them (-1: none), its
    broker added to ``leaders`` for the answer's node endpoints."""
    leader = cache.leader(tp)
    if leader is None:
        return {"leader_id": -1, "leader_epoch": -1}
    leaders[leader.id] = leader
    epoch = next(
        (p.leader_epoch for p in cache.partitions(tp.topic) if p.partition == tp.partition), -1
    )
    return {"leader_id": leader.id, "leader_epoch": epoch}


def handle(ctx: RequestContext, request: Request) -> Any:
    body = API.body(request)
    replica_id = _replica_id(request)
    context, unresolved = _context(ctx, request, replica_id)
    if context.error != ErrorCode.none:
        return _response(request, context, [])
    if replica_id >= 0:
        isolation = FetchIsolation.LOG_END
    elif field(body, "isolation_level", 0) == 1:
        isolation = FetchIsolation.TXN_COMMITTED
    else:
        isolation = FetchIsolation.HIGH_WATERMARK
    max_bytes = field(body, "max_bytes", 2**31 - 1)
    quotas = ctx.quotas
    quota = None
    if quotas is not None and replica_id < 0 and quotas.managers.fetch.quotas_enabled:
        quota = quotas.managers.fetch
        bound = quota.max_value_in_quota_window(ctx.principal.name, ctx.client_id)
        if bound < max_bytes:
            max_bytes = max(int(bound), 1)
    params = FetchParams(
        replica_id=replica_id,
        max_wait_ms=ms(body.max_wait),
        min_bytes=body.min_bytes,
        max_bytes=max_bytes,
        isolation=isolation,
    )
    cache = ctx.metadata_cache
    fetches = []
    for tp, s in context.partitions.items():
        if s.topic_id is not None and cache.topic_id(tp.topic) != s.topic_id:
            unresolved.append(Unresolved(s.topic_id, [tp.partition]))  # recreated since
            continue
        fetches.append(
            PartitionFetch(
                tp, s.fetch_offset, s.max_bytes, s.current_leader_epoch, s.log_start_offset
            )
        )
    denied: list[tuple[PartitionFetch, FetchPartitionData]] = []
    if ctx.authorizer is not None:
        fetches, denied = _authorized(ctx, replica_id, fetches)
    future = Answer(loop=asyncio.get_running_loop())  # written by the network layer when set

    def done(results: list[tuple[PartitionFetch, FetchPartitionData]]) -> None:
        if future.done():
            return
        if quota is not None:
            throttle = _throttle_ms(ctx, quota, results)
            if throttle:
                future.set_result(_throttled_response(request, context, throttle))
                return
        stats = ctx.topic_stats
        if stats is not None and replica_id < 0:  # a follower's bytes are replication
            for fetch, data in results:
                if data.records is not None and data.records.size:
                    stats.topic(fetch.tp.topic).bytes_out += data.records.size
        answered = denied + results if denied else results
        future.set_result(_response(request, context, answered, unresolved, cache))

    ctx.replica_manager.fetch_messages(params, fetches, done)
    return future


def _throttle_ms(
    ctx: RequestContext,
    quota: ClientQuotaManager,
    results: list[tuple[PartitionFetch, FetchPartitionData]],
) -> int:
    """Record the answer's bytes against the consumer's quota; if that throttles, take
    them back (the answer goes out empty) and return the throttle."""
    size = sum(data.records.size for _, data in results if data.records is not None)
    name, client_id, now = ctx.principal.name, ctx.client_id, ctx.clock.hi_res_clock_ms()
    throttle = quota.record_and_get_throttle_time_ms(name, client_id, size, now)
    if throttle:
        quota.unrecord(name, client_id, size, now)
        quota.record_throttle(name, client_id, throttle, now)
    return throttle


def _throttled_response(request: Request, context: FetchContext, throttle_ms: int) -> Any:
    """An empty answer carrying the throttle (Kafka's ``getThrottledResponse``: the session
    id of an incremental fetch, none for a full one)."""
    response = with_throttle_time(_response(request, context, []), throttle_ms)
    if not context.incremental and hasattr(response, "session_id") and response.session_id:
        response = dataclasses.replace(response, session_id=INVALID_SESSION_ID)
    return response
