"""Request handlers: one module per API, each ``handle(ctx, request) -> response``.

A handler turns a decoded request (kio's dataclass for its version) into a
response dataclass of the same version, or an awaitable of one, or None when
the request gets no response (acks=0 produce). It uses only what its
:class:`~sluice.server.request_context.RequestContext` holds (replica manager,
metadata cache, coordinators, topic admin, ...); state lives there, never here.
Adding an API is adding a module and a line below.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, Request

if TYPE_CHECKING:
    from sluice.server.cluster import ClusterManager
    from sluice.server.request_context import RequestContext

__all__ = ["HANDLER_MODULES", "SERVED_BEFORE_COORDINATORS", "build_handlers", "build_raw_handlers"]


# API key -> the module (in this package) whose ``handle`` serves it. The modules are
# imported by build_handlers, not here: the broker opens its listeners knowing only
# the keys, and imports the handlers while it finishes starting.
HANDLER_MODULES: dict[int, str] = {
    ApiKey.API_VERSIONS: "api_versions",
    ApiKey.METADATA: "metadata",
    ApiKey.PRODUCE: "produce",
    ApiKey.FETCH: "fetch",
    ApiKey.LIST_OFFSETS: "list_offsets",
    ApiKey.CREATE_TOPICS: "create_topics",
    ApiKey.DELETE_TOPICS: "delete_topics",
    ApiKey.DELETE_RECORDS: "delete_records",
    ApiKey.OFFSET_FOR_LEADER_EPOCH: "offset_for_leader_epoch",
    ApiKey.DESCRIBE_CONFIGS: "describe_configs",
    ApiKey.ALTER_CONFIGS: "alter_configs",
    ApiKey.CREATE_PARTITIONS: "create_partitions",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "incremental_alter_configs",
    ApiKey.DESCRIBE_CLUSTER: "describe_cluster",
    ApiKey.INIT_PRODUCER_ID: "init_producer_id",
    ApiKey.ELECT_LEADERS: "elect_leaders",
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: "alter_partition_reassignments",
    ApiKey.LIST_PARTITION_REASSIGNMENTS: "list_partition_reassignments",
    # Group coordinator APIs.
    ApiKey.FIND_COORDINATOR: "find_coordinator",
    ApiKey.JOIN_GROUP: "join_group",
    ApiKey.SYNC_GROUP: "sync_group",
    ApiKey.HEARTBEAT: "heartbeat",
    ApiKey.LEAVE_GROUP: "leave_group",
    ApiKey.OFFSET_COMMIT: "offset_commit",
    ApiKey.OFFSET_FETCH: "offset_fetch",
    ApiKey.DESCRIBE_GROUPS: "describe_groups",
    ApiKey.LIST_GROUPS: "list_groups",
    ApiKey.DELETE_GROUPS: "delete_groups",
    ApiKey.OFFSET_DELETE: "offset_delete",
    # Transaction coordinator APIs.
    ApiKey.ADD_PARTITIONS_TO_TXN: "add_partitions_to_txn",
    ApiKey.ADD_OFFSETS_TO_TXN: "add_offsets_to_txn",
    ApiKey.END_TXN: "end_txn",
    ApiKey.WRITE_TXN_MARKERS: "write_txn_markers",
    ApiKey.TXN_OFFSET_COMMIT: "txn_offset_commit",
    ApiKey.DESCRIBE_TRANSACTIONS: "describe_transactions",
    ApiKey.LIST_TRANSACTIONS: "list_transactions",
}


# What a single-node broker serves as soon as its listeners open, before the group and
# transaction coordinators exist: these handlers neither touch a coordinator nor import
# sluice.coordinator. (Kafka enables request processing for every API at once, and its
# coordinator APIs answer retriable errors until the coordinators have loaded.) The
# others are held until the coordinators are built, then answered in arrival order:
# the group and transaction APIs, InitProducerId, DeleteTopics (drops the topic's
# committed offsets), CreateTopics (could otherwise create __consumer_offsets before
# the coordinator does, with the wrong partition count), and the reassignment and
# election APIs (their modules import the coordinator runtime).
SERVED_BEFORE_COORDINATORS: tuple[int, ...] = (
    ApiKey.API_VERSIONS,  # in this order: a client's first requests first
    ApiKey.METADATA,
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.LIST_OFFSETS,
    ApiKey.DESCRIBE_CLUSTER,
    ApiKey.DESCRIBE_CONFIGS,
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    ApiKey.DELETE_RECORDS,
    ApiKey.CREATE_PARTITIONS,
    ApiKey.ALTER_CONFIGS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
)


def build_handlers(
    keys: Iterable[int] | None = None,
) -> dict[int, Callable[[RequestContext, Request], Any]]:
    """API key -> handler function, importing their modules; for ``keys`` (default: all
    of HANDLER_MODULES, exactly the APIs the broker advertises)."""
    return {
        key: importlib.import_module(f"{__name__}.{HANDLER_MODULES[key]}").handle
        for key in (HANDLER_MODULES if keys is None else keys)
    }


def build_raw_handlers(cluster: ClusterManager) -> dict[int, Callable[[bytes], Any]]:
    """The controller's inter-broker APIs (LeaderAndIsr, StopReplica, UpdateMetadata,
    and ControlledShutdown from a broker to the controller, answered asynchronously):
    kio has no schema for them, so they are decoded and encoded by
    :mod:`sluice.server.inter_broker`; each function takes a request frame and returns
    the framed response. Only served in cluster mode, by this broker's ``cluster``."""
    import struct

    from sluice.controller.requests import (
        ControllerRequest,
        LeaderAndIsrRequest,
        StopReplicaRequest,
    )
    from sluice.server import inter_broker
    from sluice.server.apis import (
        controlled_shutdown,
        leader_and_isr,
        stop_replica,
        update_metadata,
    )

    def answer(request: ControllerRequest) -> object:
        if isinstance(request, LeaderAndIsrRequest):
            return leader_and_isr.handle(cluster, request)
        if isinstance(request, StopReplicaRequest):
            return stop_replica.handle(cluster, request)
        return update_metadata.handle(cluster, request)

    def serve(frame: bytes) -> bytes:
        api_key, _version, correlation_id, body = inter_broker.parse_raw_request(frame)
        response = answer(inter_broker.decode_controller_request(api_key, body))
        payload = struct.pack(">i", correlation_id) + inter_broker.encode_controller_response(
            api_key, response
        )
        return struct.pack(">i", len(payload)) + payload

    async def serve_controlled_shutdown(frame: bytes) -> bytes:
        _key, _version, correlation_id, body = inter_broker.parse_raw_request(frame)
        broker_id, broker_epoch = inter_broker.decode_controlled_shutdown_request(body)
        result = await controlled_shutdown.handle(cluster, broker_id, broker_epoch)
        payload = struct.pack(">i", correlation_id)
        payload += inter_broker.encode_controlled_shutdown_response(result)
        return struct.pack(">i", len(payload)) + payload

    served: dict[int, Callable[[bytes], Any]] = {
        inter_broker.LEADER_AND_ISR: serve,
        inter_broker.STOP_REPLICA: serve,
        inter_broker.UPDATE_METADATA: serve,
    }
    served[inter_broker.CONTROLLED_SHUTDOWN] = serve_controlled_shutdown
    return served
