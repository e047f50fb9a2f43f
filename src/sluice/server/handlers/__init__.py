"""Request handlers: one module per API, each ``handle(broker, request) -> response``.

A handler turns a decoded request (kio's dataclass for its version) into a
response dataclass of the same version, or an awaitable of one, or None when
the request gets no response (acks=0 produce). State lives in the broker's
replica manager, logs and registries, never here. Adding an API is adding a
module and a line below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sluice.protocol import ApiKey

__all__ = ["build_handlers", "build_raw_handlers"]


def build_handlers() -> dict[int, Callable[..., Any]]:
    """API key -> handler function; the broker advertises exactly these APIs."""
    from sluice.server.handlers import (
        add_offsets_to_txn,
        add_partitions_to_txn,
        alter_configs,
        alter_partition_reassignments,
        api_versions,
        create_partitions,
        create_topics,
        delete_groups,
        delete_records,
        delete_topics,
        describe_cluster,
        describe_configs,
        describe_groups,
        describe_transactions,
        elect_leaders,
        end_txn,
        fetch,
        find_coordinator,
        heartbeat,
        incremental_alter_configs,
        init_producer_id,
        join_group,
        leave_group,
        list_groups,
        list_offsets,
        list_partition_reassignments,
        list_transactions,
        metadata,
        offset_commit,
        offset_delete,
        offset_fetch,
        offset_for_leader_epoch,
        produce,
        sync_group,
        txn_offset_commit,
        write_txn_markers,
    )

    return {
        ApiKey.API_VERSIONS: api_versions.handle,
        ApiKey.METADATA: metadata.handle,
        ApiKey.PRODUCE: produce.handle,
        ApiKey.FETCH: fetch.handle,
        ApiKey.LIST_OFFSETS: list_offsets.handle,
        ApiKey.CREATE_TOPICS: create_topics.handle,
        ApiKey.DELETE_TOPICS: delete_topics.handle,
        ApiKey.DELETE_RECORDS: delete_records.handle,
        ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch.handle,
        ApiKey.DESCRIBE_CONFIGS: describe_configs.handle,
        ApiKey.ALTER_CONFIGS: alter_configs.handle,
        ApiKey.CREATE_PARTITIONS: create_partitions.handle,
        ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs.handle,
        ApiKey.DESCRIBE_CLUSTER: describe_cluster.handle,
        ApiKey.INIT_PRODUCER_ID: init_producer_id.handle,
        ApiKey.ELECT_LEADERS: elect_leaders.handle,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: alter_partition_reassignments.handle,
        ApiKey.LIST_PARTITION_REASSIGNMENTS: list_partition_reassignments.handle,
        # Group coordinator APIs.
        ApiKey.FIND_COORDINATOR: find_coordinator.handle,
        ApiKey.JOIN_GROUP: join_group.handle,
        ApiKey.SYNC_GROUP: sync_group.handle,
        ApiKey.HEARTBEAT: heartbeat.handle,
        ApiKey.LEAVE_GROUP: leave_group.handle,
        ApiKey.OFFSET_COMMIT: offset_commit.handle,
        ApiKey.OFFSET_FETCH: offset_fetch.handle,
        ApiKey.DESCRIBE_GROUPS: describe_groups.handle,
        ApiKey.LIST_GROUPS: list_groups.handle,
        ApiKey.DELETE_GROUPS: delete_groups.handle,
        ApiKey.OFFSET_DELETE: offset_delete.handle,
        # Transaction coordinator APIs.
        ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn.handle,
        ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn.handle,
        ApiKey.END_TXN: end_txn.handle,
        ApiKey.WRITE_TXN_MARKERS: write_txn_markers.handle,
        ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit.handle,
        ApiKey.DESCRIBE_TRANSACTIONS: describe_transactions.handle,
        ApiKey.LIST_TRANSACTIONS: list_transactions.handle,
    }


def build_raw_handlers(broker: Any) -> dict[int, Callable[[bytes], Any]]:
    """The controller's inter-broker APIs (LeaderAndIsr, StopReplica, UpdateMetadata,
    and ControlledShutdown from a broker to the controller, answered asynchronously):
    kio has no schema for them, so they are decoded and encoded by
    :mod:`sluice.server.inter_broker`; each function takes a request frame and returns
    the framed response. Only served in cluster mode."""
    import struct

    from sluice.server import inter_broker
    from sluice.server.handlers import (
        controlled_shutdown,
        leader_and_isr,
        stop_replica,
        update_metadata,
    )

    handlers = {
        inter_broker.LEADER_AND_ISR: leader_and_isr.handle,
        inter_broker.STOP_REPLICA: stop_replica.handle,
        inter_broker.UPDATE_METADATA: update_metadata.handle,
    }

    def serve(frame: bytes) -> bytes:
        api_key, _version, correlation_id, body = inter_broker.parse_raw_request(frame)
        request = inter_broker.decode_controller_request(api_key, body)
        response = handlers[api_key](broker, request)
        payload = struct.pack(">i", correlation_id) + inter_broker.encode_controller_response(
            api_key, response
        )
        return struct.pack(">i", len(payload)) + payload

    async def serve_controlled_shutdown(frame: bytes) -> bytes:
        _key, _version, correlation_id, body = inter_broker.parse_raw_request(frame)
        broker_id, broker_epoch = inter_broker.decode_controlled_shutdown_request(body)
        result = await controlled_shutdown.handle(broker, broker_id, broker_epoch)
        payload = struct.pack(">i", correlation_id)
        payload += inter_broker.encode_controlled_shutdown_response(result)
        return struct.pack(">i", len(payload)) + payload

    served: dict[int, Callable[[bytes], Any]] = {key: serve for key in handlers}
    served[inter_broker.CONTROLLED_SHUTDOWN] = serve_controlled_shutdown
    return served
