"""kio's request classes of each API Sluice serves, as the union of the versions it
accepts (:data:`~sluice.protocol.versions.DEFAULT_VERSIONS`): the type of a handler's
request body. For type checking only: at run time kio's classes are imported one
(API, version) at a time, when a request of that version is first decoded
(:func:`~sluice.protocol.apis.request_type`); :func:`body_of` gives a request's body
its type. ``tests/protocol/test_request_types.py`` checks that the unions and the
version table agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeAlias, overload

from kio.static.protocol import RequestPayload

from .apis import ApiKey
from .codec import Request

if TYPE_CHECKING:
    import kio.schema.add_offsets_to_txn.v0.request as _add_offsets_to_txn_v0
    import kio.schema.add_offsets_to_txn.v1.request as _add_offsets_to_txn_v1
    import kio.schema.add_offsets_to_txn.v2.request as _add_offsets_to_txn_v2
    import kio.schema.add_offsets_to_txn.v3.request as _add_offsets_to_txn_v3
    import kio.schema.add_partitions_to_txn.v0.request as _add_partitions_to_txn_v0
    import kio.schema.add_partitions_to_txn.v1.request as _add_partitions_to_txn_v1
    import kio.schema.add_partitions_to_txn.v2.request as _add_partitions_to_txn_v2
    import kio.schema.add_partitions_to_txn.v3.request as _add_partitions_to_txn_v3
    import kio.schema.alter_configs.v0.request as _alter_configs_v0
    import kio.schema.alter_configs.v1.request as _alter_configs_v1
    import kio.schema.alter_configs.v2.request as _alter_configs_v2
    import kio.schema.alter_partition_reassignments.v0.request as _alter_partition_reassignments_v0
    import kio.schema.alter_partition_reassignments.v1.request as _alter_partition_reassignments_v1
    import kio.schema.api_versions.v0.request as _api_versions_v0
    import kio.schema.api_versions.v1.request as _api_versions_v1
    import kio.schema.api_versions.v2.request as _api_versions_v2
    import kio.schema.api_versions.v3.request as _api_versions_v3
    import kio.schema.api_versions.v4.request as _api_versions_v4
    import kio.schema.create_partitions.v0.request as _create_partitions_v0
    import kio.schema.create_partitions.v1.request as _create_partitions_v1
    import kio.schema.create_partitions.v2.request as _create_partitions_v2
    import kio.schema.create_partitions.v3.request as _create_partitions_v3
    import kio.schema.create_topics.v2.request as _create_topics_v2
    import kio.schema.create_topics.v3.request as _create_topics_v3
    import kio.schema.create_topics.v4.request as _create_topics_v4
    import kio.schema.create_topics.v5.request as _create_topics_v5
    import kio.schema.create_topics.v6.request as _create_topics_v6
    import kio.schema.create_topics.v7.request as _create_topics_v7
    import kio.schema.delete_groups.v0.request as _delete_groups_v0
    import kio.schema.delete_groups.v1.request as _delete_groups_v1
    import kio.schema.delete_groups.v2.request as _delete_groups_v2
    import kio.schema.delete_records.v0.request as _delete_records_v0
    import kio.schema.delete_records.v1.request as _delete_records_v1
    import kio.schema.delete_records.v2.request as _delete_records_v2
    import kio.schema.delete_topics.v1.request as _delete_topics_v1
    import kio.schema.delete_topics.v2.request as _delete_topics_v2
    import kio.schema.delete_topics.v3.request as _delete_topics_v3
    import kio.schema.delete_topics.v4.request as _delete_topics_v4
    import kio.schema.delete_topics.v5.request as _delete_topics_v5
    import kio.schema.delete_topics.v6.request as _delete_topics_v6
    import kio.schema.describe_cluster.v0.request as _describe_cluster_v0
    import kio.schema.describe_cluster.v1.request as _describe_cluster_v1
    import kio.schema.describe_configs.v1.request as _describe_configs_v1
    import kio.schema.describe_configs.v2.request as _describe_configs_v2
    import kio.schema.describe_configs.v3.request as _describe_configs_v3
    import kio.schema.describe_configs.v4.request as _describe_configs_v4
    import kio.schema.describe_groups.v0.request as _describe_groups_v0
    import kio.schema.describe_groups.v1.request as _describe_groups_v1
    import kio.schema.describe_groups.v2.request as _describe_groups_v2
    import kio.schema.describe_groups.v3.request as _describe_groups_v3
    import kio.schema.describe_groups.v4.request as _describe_groups_v4
    import kio.schema.describe_groups.v5.request as _describe_groups_v5
    import kio.schema.describe_transactions.v0.request as _describe_transactions_v0
    import kio.schema.elect_leaders.v0.request as _elect_leaders_v0
    import kio.schema.elect_leaders.v1.request as _elect_leaders_v1
    import kio.schema.elect_leaders.v2.request as _elect_leaders_v2
    import kio.schema.end_txn.v0.request as _end_txn_v0
    import kio.schema.end_txn.v1.request as _end_txn_v1
    import kio.schema.end_txn.v2.request as _end_txn_v2
    import kio.schema.end_txn.v3.request as _end_txn_v3
    import kio.schema.fetch.v4.request as _fetch_v4
    import kio.schema.fetch.v5.request as _fetch_v5
    import kio.schema.fetch.v6.request as _fetch_v6
    import kio.schema.fetch.v7.request as _fetch_v7
    import kio.schema.fetch.v8.request as _fetch_v8
    import kio.schema.fetch.v9.request as _fetch_v9
    import kio.schema.fetch.v10.request as _fetch_v10
    import kio.schema.fetch.v11.request as _fetch_v11
    import kio.schema.fetch.v12.request as _fetch_v12
    import kio.schema.find_coordinator.v0.request as _find_coordinator_v0
    import kio.schema.find_coordinator.v1.request as _find_coordinator_v1
    import kio.schema.find_coordinator.v2.request as _find_coordinator_v2
    import kio.schema.find_coordinator.v3.request as _find_coordinator_v3
    import kio.schema.find_coordinator.v4.request as _find_coordinator_v4
    import kio.schema.heartbeat.v0.request as _heartbeat_v0
    import kio.schema.heartbeat.v1.request as _heartbeat_v1
    import kio.schema.heartbeat.v2.request as _heartbeat_v2
    import kio.schema.heartbeat.v3.request as _heartbeat_v3
    import kio.schema.heartbeat.v4.request as _heartbeat_v4
    import kio.schema.incremental_alter_configs.v0.request as _incremental_alter_configs_v0
    import kio.schema.incremental_alter_configs.v1.request as _incremental_alter_configs_v1
    import kio.schema.init_producer_id.v0.request as _init_producer_id_v0
    import kio.schema.init_producer_id.v1.request as _init_producer_id_v1
    import kio.schema.init_producer_id.v2.request as _init_producer_id_v2
    import kio.schema.init_producer_id.v3.request as _init_producer_id_v3
    import kio.schema.init_producer_id.v4.request as _init_producer_id_v4
    import kio.schema.init_producer_id.v5.request as _init_producer_id_v5
    import kio.schema.join_group.v0.request as _join_group_v0
    import kio.schema.join_group.v1.request as _join_group_v1
    import kio.schema.join_group.v2.request as _join_group_v2
    import kio.schema.join_group.v3.request as _join_group_v3
    import kio.schema.join_group.v4.request as _join_group_v4
    import kio.schema.join_group.v5.request as _join_group_v5
    import kio.schema.join_group.v6.request as _join_group_v6
    import kio.schema.join_group.v7.request as _join_group_v7
    import kio.schema.join_group.v8.request as _join_group_v8
    import kio.schema.join_group.v9.request as _join_group_v9
    import kio.schema.leave_group.v0.request as _leave_group_v0
    import kio.schema.leave_group.v1.request as _leave_group_v1
    import kio.schema.leave_group.v2.request as _leave_group_v2
    import kio.schema.leave_group.v3.request as _leave_group_v3
    import kio.schema.leave_group.v4.request as _leave_group_v4
    import kio.schema.leave_group.v5.request as _leave_group_v5
    import kio.schema.list_groups.v0.request as _list_groups_v0
    import kio.schema.list_groups.v1.request as _list_groups_v1
    import kio.schema.list_groups.v2.request as _list_groups_v2
    import kio.schema.list_groups.v3.request as _list_groups_v3
    import kio.schema.list_groups.v4.request as _list_groups_v4
    import kio.schema.list_groups.v5.request as _list_groups_v5
    import kio.schema.list_offsets.v1.request as _list_offsets_v1
    import kio.schema.list_offsets.v2.request as _list_offsets_v2
    import kio.schema.list_offsets.v3.request as _list_offsets_v3
    import kio.schema.list_offsets.v4.request as _list_offsets_v4
    import kio.schema.list_offsets.v5.request as _list_offsets_v5
    import kio.schema.list_offsets.v6.request as _list_offsets_v6
    import kio.schema.list_offsets.v7.request as _list_offsets_v7
    import kio.schema.list_partition_reassignments.v0.request as _list_partition_reassignments_v0
    import kio.schema.list_transactions.v0.request as _list_transactions_v0
    import kio.schema.list_transactions.v1.request as _list_transactions_v1
    import kio.schema.metadata.v0.request as _metadata_v0
    import kio.schema.metadata.v1.request as _metadata_v1
    import kio.schema.metadata.v2.request as _metadata_v2
    import kio.schema.metadata.v3.request as _metadata_v3
    import kio.schema.metadata.v4.request as _metadata_v4
    import kio.schema.metadata.v5.request as _metadata_v5
    import kio.schema.metadata.v6.request as _metadata_v6
    import kio.schema.metadata.v7.request as _metadata_v7
    import kio.schema.metadata.v8.request as _metadata_v8
    import kio.schema.metadata.v9.request as _metadata_v9
    import kio.schema.metadata.v10.request as _metadata_v10
    import kio.schema.metadata.v11.request as _metadata_v11
    import kio.schema.metadata.v12.request as _metadata_v12
    import kio.schema.offset_commit.v2.request as _offset_commit_v2
    import kio.schema.offset_commit.v3.request as _offset_commit_v3
    import kio.schema.offset_commit.v4.request as _offset_commit_v4
    import kio.schema.offset_commit.v5.request as _offset_commit_v5
    import kio.schema.offset_commit.v6.request as _offset_commit_v6
    import kio.schema.offset_commit.v7.request as _offset_commit_v7
    import kio.schema.offset_commit.v8.request as _offset_commit_v8
    import kio.schema.offset_delete.v0.request as _offset_delete_v0
    import kio.schema.offset_fetch.v1.request as _offset_fetch_v1
    import kio.schema.offset_fetch.v2.request as _offset_fetch_v2
    import kio.schema.offset_fetch.v3.request as _offset_fetch_v3
    import kio.schema.offset_fetch.v4.request as _offset_fetch_v4
    import kio.schema.offset_fetch.v5.request as _offset_fetch_v5
    import kio.schema.offset_fetch.v6.request as _offset_fetch_v6
    import kio.schema.offset_fetch.v7.request as _offset_fetch_v7
    import kio.schema.offset_fetch.v8.request as _offset_fetch_v8
    import kio.schema.offset_for_leader_epoch.v2.request as _offset_for_leader_epoch_v2
    import kio.schema.offset_for_leader_epoch.v3.request as _offset_for_leader_epoch_v3
    import kio.schema.offset_for_leader_epoch.v4.request as _offset_for_leader_epoch_v4
    import kio.schema.produce.v3.request as _produce_v3
    import kio.schema.produce.v4.request as _produce_v4
    import kio.schema.produce.v5.request as _produce_v5
    import kio.schema.produce.v6.request as _produce_v6
    import kio.schema.produce.v7.request as _produce_v7
    import kio.schema.produce.v8.request as _produce_v8
    import kio.schema.produce.v9.request as _produce_v9
    import kio.schema.produce.v10.request as _produce_v10
    import kio.schema.produce.v11.request as _produce_v11
    import kio.schema.sync_group.v0.request as _sync_group_v0
    import kio.schema.sync_group.v1.request as _sync_group_v1
    import kio.schema.sync_group.v2.request as _sync_group_v2
    import kio.schema.sync_group.v3.request as _sync_group_v3
    import kio.schema.sync_group.v4.request as _sync_group_v4
    import kio.schema.sync_group.v5.request as _sync_group_v5
    import kio.schema.txn_offset_commit.v0.request as _txn_offset_commit_v0
    import kio.schema.txn_offset_commit.v1.request as _txn_offset_commit_v1
    import kio.schema.txn_offset_commit.v2.request as _txn_offset_commit_v2
    import kio.schema.txn_offset_commit.v3.request as _txn_offset_commit_v3
    import kio.schema.write_txn_markers.v1.request as _write_txn_markers_v1

    AddOffsetsToTxnRequest: TypeAlias = (
        _add_offsets_to_txn_v0.AddOffsetsToTxnRequest
        | _add_offsets_to_txn_v1.AddOffsetsToTxnRequest
        | _add_offsets_to_txn_v2.AddOffsetsToTxnRequest
        | _add_offsets_to_txn_v3.AddOffsetsToTxnRequest
    )
    AddPartitionsToTxnRequest: TypeAlias = (
        _add_partitions_to_txn_v0.AddPartitionsToTxnRequest
        | _add_partitions_to_txn_v1.AddPartitionsToTxnRequest
        | _add_partitions_to_txn_v2.AddPartitionsToTxnRequest
        | _add_partitions_to_txn_v3.AddPartitionsToTxnRequest
    )
    AlterConfigsRequest: TypeAlias = (
        _alter_configs_v0.AlterConfigsRequest
        | _alter_configs_v1.AlterConfigsRequest
        | _alter_configs_v2.AlterConfigsRequest
    )
    AlterPartitionReassignmentsRequest: TypeAlias = (
        _alter_partition_reassignments_v0.AlterPartitionReassignmentsRequest
        | _alter_partition_reassignments_v1.AlterPartitionReassignmentsRequest
    )
    ApiVersionsRequest: TypeAlias = (
        _api_versions_v0.ApiVersionsRequest
        | _api_versions_v1.ApiVersionsRequest
        | _api_versions_v2.ApiVersionsRequest
        | _api_versions_v3.ApiVersionsRequest
        | _api_versions_v4.ApiVersionsRequest
    )
    CreatePartitionsRequest: TypeAlias = (
        _create_partitions_v0.CreatePartitionsRequest
        | _create_partitions_v1.CreatePartitionsRequest
        | _create_partitions_v2.CreatePartitionsRequest
        | _create_partitions_v3.CreatePartitionsRequest
    )
    CreateTopicsRequest: TypeAlias = (
        _create_topics_v2.CreateTopicsRequest
        | _create_topics_v3.CreateTopicsRequest
        | _create_topics_v4.CreateTopicsRequest
        | _create_topics_v5.CreateTopicsRequest
        | _create_topics_v6.CreateTopicsRequest
        | _create_topics_v7.CreateTopicsRequest
    )
    DeleteGroupsRequest: TypeAlias = (
        _delete_groups_v0.DeleteGroupsRequest
        | _delete_groups_v1.DeleteGroupsRequest
        | _delete_groups_v2.DeleteGroupsRequest
    )
    DeleteRecordsRequest: TypeAlias = (
        _delete_records_v0.DeleteRecordsRequest
        | _delete_records_v1.DeleteRecordsRequest
        | _delete_records_v2.DeleteRecordsRequest
    )
    DeleteTopicsRequest: TypeAlias = (
        _delete_topics_v1.DeleteTopicsRequest
        | _delete_topics_v2.DeleteTopicsRequest
        | _delete_topics_v3.DeleteTopicsRequest
        | _delete_topics_v4.DeleteTopicsRequest
        | _delete_topics_v5.DeleteTopicsRequest
        | _delete_topics_v6.DeleteTopicsRequest
    )
    DescribeClusterRequest: TypeAlias = (
        _describe_cluster_v0.DescribeClusterRequest | _describe_cluster_v1.DescribeClusterRequest
    )
    DescribeConfigsRequest: TypeAlias = (
        _describe_configs_v1.DescribeConfigsRequest
        | _describe_configs_v2.DescribeConfigsRequest
        | _describe_configs_v3.DescribeConfigsRequest
        | _describe_configs_v4.DescribeConfigsRequest
    )
    DescribeGroupsRequest: TypeAlias = (
        _describe_groups_v0.DescribeGroupsRequest
        | _describe_groups_v1.DescribeGroupsRequest
        | _describe_groups_v2.DescribeGroupsRequest
        | _describe_groups_v3.DescribeGroupsRequest
        | _describe_groups_v4.DescribeGroupsRequest
        | _describe_groups_v5.DescribeGroupsRequest
    )
    DescribeTransactionsRequest: TypeAlias = _describe_transactions_v0.DescribeTransactionsRequest
    ElectLeadersRequest: TypeAlias = (
        _elect_leaders_v0.ElectLeadersRequest
        | _elect_leaders_v1.ElectLeadersRequest
        | _elect_leaders_v2.ElectLeadersRequest
    )
    EndTxnRequest: TypeAlias = (
        _end_txn_v0.EndTxnRequest
        | _end_txn_v1.EndTxnRequest
        | _end_txn_v2.EndTxnRequest
        | _end_txn_v3.EndTxnRequest
    )
    FetchRequest: TypeAlias = (
        _fetch_v4.FetchRequest
        | _fetch_v5.FetchRequest
        | _fetch_v6.FetchRequest
        | _fetch_v7.FetchRequest
        | _fetch_v8.FetchRequest
        | _fetch_v9.FetchRequest
        | _fetch_v10.FetchRequest
        | _fetch_v11.FetchRequest
        | _fetch_v12.FetchRequest
    )
    FindCoordinatorRequest: TypeAlias = (
        _find_coordinator_v0.FindCoordinatorRequest
        | _find_coordinator_v1.FindCoordinatorRequest
        | _find_coordinator_v2.FindCoordinatorRequest
        | _find_coordinator_v3.FindCoordinatorRequest
        | _find_coordinator_v4.FindCoordinatorRequest
    )
    HeartbeatRequest: TypeAlias = (
        _heartbeat_v0.HeartbeatRequest
        | _heartbeat_v1.HeartbeatRequest
        | _heartbeat_v2.HeartbeatRequest
        | _heartbeat_v3.HeartbeatRequest
        | _heartbeat_v4.HeartbeatRequest
    )
    IncrementalAlterConfigsRequest: TypeAlias = (
        _incremental_alter_configs_v0.IncrementalAlterConfigsRequest
        | _incremental_alter_configs_v1.IncrementalAlterConfigsRequest
    )
    InitProducerIdRequest: TypeAlias = (
        _init_producer_id_v0.InitProducerIdRequest
        | _init_producer_id_v1.InitProducerIdRequest
        | _init_producer_id_v2.InitProducerIdRequest
        | _init_producer_id_v3.InitProducerIdRequest
        | _init_producer_id_v4.InitProducerIdRequest
        | _init_producer_id_v5.InitProducerIdRequest
    )
    JoinGroupRequest: TypeAlias = (
        _join_group_v0.JoinGroupRequest
        | _join_group_v1.JoinGroupRequest
        | _join_group_v2.JoinGroupRequest
        | _join_group_v3.JoinGroupRequest
        | _join_group_v4.JoinGroupRequest
        | _join_group_v5.JoinGroupRequest
        | _join_group_v6.JoinGroupRequest
        | _join_group_v7.JoinGroupRequest
        | _join_group_v8.JoinGroupRequest
        | _join_group_v9.JoinGroupRequest
    )
    LeaveGroupRequest: TypeAlias = (
        _leave_group_v0.LeaveGroupRequest
        | _leave_group_v1.LeaveGroupRequest
        | _leave_group_v2.LeaveGroupRequest
        | _leave_group_v3.LeaveGroupRequest
        | _leave_group_v4.LeaveGroupRequest
        | _leave_group_v5.LeaveGroupRequest
    )
    ListGroupsRequest: TypeAlias = (
        _list_groups_v0.ListGroupsRequest
        | _list_groups_v1.ListGroupsRequest
        | _list_groups_v2.ListGroupsRequest
        | _list_groups_v3.ListGroupsRequest
        | _list_groups_v4.ListGroupsRequest
        | _list_groups_v5.ListGroupsRequest
    )
    ListOffsetsRequest: TypeAlias = (
        _list_offsets_v1.ListOffsetsRequest
        | _list_offsets_v2.ListOffsetsRequest
        | _list_offsets_v3.ListOffsetsRequest
        | _list_offsets_v4.ListOffsetsRequest
        | _list_offsets_v5.ListOffsetsRequest
        | _list_offsets_v6.ListOffsetsRequest
        | _list_offsets_v7.ListOffsetsRequest
    )
    ListPartitionReassignmentsRequest: TypeAlias = (
        _list_partition_reassignments_v0.ListPartitionReassignmentsRequest
    )
    ListTransactionsRequest: TypeAlias = (
        _list_transactions_v0.ListTransactionsRequest
        | _list_transactions_v1.ListTransactionsRequest
    )
    MetadataRequest: TypeAlias = (
        _metadata_v0.MetadataRequest
        | _metadata_v1.MetadataRequest
        | _metadata_v2.MetadataRequest
        | _metadata_v3.MetadataRequest
        | _metadata_v4.MetadataRequest
        | _metadata_v5.MetadataRequest
        | _metadata_v6.MetadataRequest
        | _metadata_v7.MetadataRequest
        | _metadata_v8.MetadataRequest
        | _metadata_v9.MetadataRequest
        | _metadata_v10.MetadataRequest
        | _metadata_v11.MetadataRequest
        | _metadata_v12.MetadataRequest
    )
    OffsetCommitRequest: TypeAlias = (
        _offset_commit_v2.OffsetCommitRequest
        | _offset_commit_v3.OffsetCommitRequest
        | _offset_commit_v4.OffsetCommitRequest
        | _offset_commit_v5.OffsetCommitRequest
        | _offset_commit_v6.OffsetCommitRequest
        | _offset_commit_v7.OffsetCommitRequest
        | _offset_commit_v8.OffsetCommitRequest
    )
    OffsetDeleteRequest: TypeAlias = _offset_delete_v0.OffsetDeleteRequest
    OffsetFetchRequest: TypeAlias = (
        _offset_fetch_v1.OffsetFetchRequest
        | _offset_fetch_v2.OffsetFetchRequest
        | _offset_fetch_v3.OffsetFetchRequest
        | _offset_fetch_v4.OffsetFetchRequest
        | _offset_fetch_v5.OffsetFetchRequest
        | _offset_fetch_v6.OffsetFetchRequest
        | _offset_fetch_v7.OffsetFetchRequest
        | _offset_fetch_v8.OffsetFetchRequest
    )
    OffsetForLeaderEpochRequest: TypeAlias = (
        _offset_for_leader_epoch_v2.OffsetForLeaderEpochRequest
        | _offset_for_leader_epoch_v3.OffsetForLeaderEpochRequest
        | _offset_for_leader_epoch_v4.OffsetForLeaderEpochRequest
    )
    ProduceRequest: TypeAlias = (
        _produce_v3.ProduceRequest
        | _produce_v4.ProduceRequest
        | _produce_v5.ProduceRequest
        | _produce_v6.ProduceRequest
        | _produce_v7.ProduceRequest
        | _produce_v8.ProduceRequest
        | _produce_v9.ProduceRequest
        | _produce_v10.ProduceRequest
        | _produce_v11.ProduceRequest
    )
    SyncGroupRequest: TypeAlias = (
        _sync_group_v0.SyncGroupRequest
        | _sync_group_v1.SyncGroupRequest
        | _sync_group_v2.SyncGroupRequest
        | _sync_group_v3.SyncGroupRequest
        | _sync_group_v4.SyncGroupRequest
        | _sync_group_v5.SyncGroupRequest
    )
    TxnOffsetCommitRequest: TypeAlias = (
        _txn_offset_commit_v0.TxnOffsetCommitRequest
        | _txn_offset_commit_v1.TxnOffsetCommitRequest
        | _txn_offset_commit_v2.TxnOffsetCommitRequest
        | _txn_offset_commit_v3.TxnOffsetCommitRequest
    )
    WriteTxnMarkersRequest: TypeAlias = _write_txn_markers_v1.WriteTxnMarkersRequest


@overload
def body_of(
    request: Request, api: Literal[ApiKey.ADD_OFFSETS_TO_TXN]
) -> AddOffsetsToTxnRequest: ...


@overload
def body_of(
    request: Request, api: Literal[ApiKey.ADD_PARTITIONS_TO_TXN]
) -> AddPartitionsToTxnRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.ALTER_CONFIGS]) -> AlterConfigsRequest: ...


@overload
def body_of(
    request: Request, api: Literal[ApiKey.ALTER_PARTITION_REASSIGNMENTS]
) -> AlterPartitionReassignmentsRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.API_VERSIONS]) -> ApiVersionsRequest: ...


@overload
def body_of(
    request: Request, api: Literal[ApiKey.CREATE_PARTITIONS]
) -> CreatePartitionsRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.CREATE_TOPICS]) -> CreateTopicsRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.DELETE_GROUPS]) -> DeleteGroupsRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.DELETE_RECORDS]) -> DeleteRecordsRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.DELETE_TOPICS]) -> DeleteTopicsRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.DESCRIBE_CLUSTER]) -> DescribeClusterRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.DESCRIBE_CONFIGS]) -> DescribeConfigsRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.DESCRIBE_GROUPS]) -> DescribeGroupsRequest: ...


@overload
def body_of(
    request: Request, api: Literal[ApiKey.DESCRIBE_TRANSACTIONS]
) -> DescribeTransactionsRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.ELECT_LEADERS]) -> ElectLeadersRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.END_TXN]) -> EndTxnRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.FETCH]) -> FetchRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.FIND_COORDINATOR]) -> FindCoordinatorRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.HEARTBEAT]) -> HeartbeatRequest: ...


@overload
def body_of(
    request: Request, api: Literal[ApiKey.INCREMENTAL_ALTER_CONFIGS]
) -> IncrementalAlterConfigsRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.INIT_PRODUCER_ID]) -> InitProducerIdRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.JOIN_GROUP]) -> JoinGroupRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.LEAVE_GROUP]) -> LeaveGroupRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.LIST_GROUPS]) -> ListGroupsRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.LIST_OFFSETS]) -> ListOffsetsRequest: ...


@overload
def body_of(
    request: Request, api: Literal[ApiKey.LIST_PARTITION_REASSIGNMENTS]
) -> ListPartitionReassignmentsRequest: ...


@overload
def body_of(
    request: Request, api: Literal[ApiKey.LIST_TRANSACTIONS]
) -> ListTransactionsRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.METADATA]) -> MetadataRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.OFFSET_COMMIT]) -> OffsetCommitRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.OFFSET_DELETE]) -> OffsetDeleteRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.OFFSET_FETCH]) -> OffsetFetchRequest: ...


@overload
def body_of(
    request: Request, api: Literal[ApiKey.OFFSET_FOR_LEADER_EPOCH]
) -> OffsetForLeaderEpochRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.PRODUCE]) -> ProduceRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.SYNC_GROUP]) -> SyncGroupRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.TXN_OFFSET_COMMIT]) -> TxnOffsetCommitRequest: ...


@overload
def body_of(request: Request, api: Literal[ApiKey.WRITE_TXN_MARKERS]) -> WriteTxnMarkersRequest: ...


def body_of(request: Request, api: ApiKey) -> RequestPayload:
    """``request``'s body, typed as kio's request classes of ``api`` (the versions Sluice
    accepts); a request of another API is a programming error."""
    if request.header.api_key != api:
        raise TypeError(f"a request of API key {request.header.api_key}, not {api.name}")
    return request.body
