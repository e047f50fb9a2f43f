"""AlterPartitionReassignments (45): move partitions to new replicas (KIP-455).

Only the active controller answers (others: NOT_CONTROLLER at the top level, and the
admin client asks the controller named in Metadata). Each partition names its target
replicas, or null to cancel the reassignment in progress; the outcome per partition
comes back from the controller's event thread once the reassignment has *started*
(ListPartitionReassignments shows it until the new replicas joined the ISR).

A single node without a cluster answers as a one-broker Kafka cluster would: moving a
partition to that broker changes nothing (NONE), any other broker id is not alive
(INVALID_REPLICA_ASSIGNMENT), and there is never a reassignment to cancel
(NO_REASSIGNMENT_IN_PROGRESS).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sluice.base import TopicPartition
from sluice.controller.events import ApiError
from sluice.protocol import ErrorCode, Request
from sluice.server.group_runtime import answer_from_thread
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from sluice.server.broker import Broker

Results = Mapping[TopicPartition, ApiError] | ApiError


def _respond(request: Request, results: Results) -> Any:
    if isinstance(results, ApiError):
        return build(
            request.response_type, throttle_time=0, error_code=results.code,
            error_message=results.message, responses=[],
        )  # fmt: skip
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp in sorted(results):
        error = results[tp]
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "error_code": error.code,
             "error_message": error.message}
        )  # fmt: skip
    return build(
        request.response_type, throttle_time=0, error_code=ErrorCode.none, error_message=None,
        responses=[{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    )  # fmt: skip


def _single_node(
    broker: Broker, reassignments: Mapping[TopicPartition, tuple[int, ...] | None]
) -> dict[TopicPartition, ApiError]:
    invalid = ErrorCode.invalid_replica_assignment
    results: dict[TopicPartition, ApiError] = {}
    for tp, target in reassignments.items():
        if target is not None and not target:
            results[tp] = ApiError(
                invalid, "Empty replica list specified in partition reassignment."
            )
        elif target is not None and len(set(target)) != len(target):
            results[tp] = ApiError(invalid, f"Duplicate replica ids in {list(target)}")
        elif target is not None and any(r != broker.broker_id for r in target):
            results[tp] = ApiError(
                invalid, f"Replica assignment has brokers that are not alive: {list(target)}"
            )
        elif target is None:  # checked before the partition's existence, as in Kafka
            results[tp] = ApiError(ErrorCode.no_reassignment_in_progress)
        elif broker.replica_manager.get_partition(tp) is None:
            results[tp] = ApiError(
                ErrorCode.unknown_topic_or_partition, "The partition does not exist."
            )
        else:
            results[tp] = ApiError()  # already there
    return results


def handle(broker: Broker, request: Request) -> Any:
    body: Any = request.body
    reassignments: dict[TopicPartition, tuple[int, ...] | None] = {
        TopicPartition(t.name, int(p.partition_index)): (
            None if p.replicas is None else tuple(int(r) for r in p.replicas)
        )
        for t in body.topics
        for p in t.partitions
    }
    allow_rf_change = bool(field(body, "allow_replication_factor_change", True))
    cluster = broker.cluster
    if cluster is None:
        return _respond(request, _single_node(broker, reassignments))
    controller = cluster.active_controller
    if controller is None:
        return _respond(request, ApiError(ErrorCode.not_controller))

    async def respond() -> Any:
        results: Results = await answer_from_thread(
            lambda done: controller.alter_partition_reassignments(
                reassignments, done, allow_replication_factor_change=allow_rf_change
            )
        )
        return _respond(request, results)

    return respond()
