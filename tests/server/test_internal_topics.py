"""The internal topics (``__consumer_offsets``, ``__transaction_state``) are protected, and
a missing one is made again and coordinated without a restart.

A single node's topic admin over real logs, a real replica manager and the real group and
transaction coordinators, without an event loop: a manual clock and purgatories without
reaper threads, every append completing inline (the leader is the whole ISR).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.base import TopicPartition
from sluice.base.clock import ManualClock
from sluice.config import BrokerConfig
from sluice.coordinator.group import OffsetAndMetadata
from sluice.log import Log, LogManager
from sluice.protocol import ErrorCode
from sluice.purgatory import DelayedOperationPurgatory
from sluice.replication.metadata_cache import MetadataCache
from sluice.replication.producer_ids import ProducerIdManager
from sluice.replication.replica_manager import ReplicaManager
from sluice.server.group_runtime import OFFSETS_TOPIC_CONFIGS, build_group_coordinator
from sluice.server.request_context import Coordinators
from sluice.server.topic_admin import (
    SingleNodeTopicAdmin,
    registered_log_configs,
    topic_log_config,
)
from sluice.server.topics import InvalidTopicError, PolicyViolation, TopicRegistry
from sluice.server.txn_runtime import build_transaction_coordinator

OFFSETS = "__consumer_offsets"
TXN_STATE = "__transaction_state"
START_MS = 1_700_000_000_000


class Node:
    """A single node's topic admin with its coordinators built, as the broker wires them."""

    def __init__(self, log_dir: Path, **settings: str) -> None:
        self.clock = ManualClock(START_MS)
        self.config = BrokerConfig({
            "log.dirs": str(log_dir), "offsets.topic.num.partitions": "3",
            "transaction.state.log.num.partitions": "2", **settings,
        })  # fmt: skip
        self.purgatories: list[DelayedOperationPurgatory[Any]] = []
        self.registry = TopicRegistry(log_dir)
        self.log_manager = LogManager(
            log_dir, topic_log_config(self.config, {}), clock=self.clock,
            topic_config=registered_log_configs(self.config, self.registry),
        )  # fmt: skip
        self.replica_manager = ReplicaManager(0, self._purgatory, clock=self.clock)
        self.metadata_cache = MetadataCache(0)
        self.coordinators = Coordinators()
        self.admin = SingleNodeTopicAdmin(
            self.config, self.registry, self.log_manager, self.metadata_cache,
            self.coordinators, self.replica_manager,
        )  # fmt: skip
        self.admin.host_registered_topics()
        self.group = build_group_coordinator(
            self.config, self.admin, self.replica_manager, self._purgatory, self.clock
        )
        for partition in sorted(self.group.group_manager.loading_partitions):
            self.group.load_partition(partition)
        self.txn = build_transaction_coordinator(
            self.config, self.admin, self.replica_manager, self.metadata_cache,
            ProducerIdManager(log_dir, 0), self.group, self._purgatory, self.clock,
        )  # fmt: skip
        self.coordinators.set(self.group, self.txn)

    def _purgatory(self, name: str, purge_interval: int) -> DelayedOperationPurgatory[Any]:
        purgatory: DelayedOperationPurgatory[Any] = DelayedOperationPurgatory(
            name, purge_interval=purge_interval, reaper_enabled=False, clock=self.clock
        )
        self.purgatories.append(purgatory)
        return purgatory

    def commit(self, group_id: str, tp: TopicPartition, offset: int) -> ErrorCode:
        out: list[dict[TopicPartition, ErrorCode]] = []
        value = OffsetAndMetadata(offset, None, "", self.clock.milliseconds())
        self.group.handle_commit_offsets(group_id, "", None, -1, {tp: value}, out.append)
        assert len(out) == 1, "a single node's commit completes inline"
        return out[0][tp]

    def committed(self, group_id: str, tp: TopicPartition) -> int | None:
        error, offsets = self.group.handle_fetch_offsets(group_id, [tp])
        assert error == ErrorCode.none, error
        found = offsets.get(tp)
        return None if found is None else found.offset

    def overrides(self, name: str) -> dict[str, str]:
        info = self.admin.topic_info(name)
        assert info is not None
        return dict(info.configs)

    def partition_log(self, tp: TopicPartition) -> Log:
        partition = self.replica_manager.get_partition(tp)
        assert partition is not None
        return partition.log

    def close(self) -> None:
        self.group.shutdown()
        self.txn.shutdown()
        self.replica_manager.shutdown()
        self.log_manager.shutdown()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    made = Node(tmp_path)
    yield made
    made.close()


def test_internal_topics_cannot_be_deleted(node: Node) -> None:
    node.admin.ensure_transaction_state()
    node.admin.create_topic("plain", 1, 1, {})
    for name, holds in ((OFFSETS, "committed offsets"), (TXN_STATE, "transactional ids")):
        with pytest.raises(InvalidTopicError, match=f"Cannot delete internal topic {name}"):
            node.admin.delete_topic(name)
        with pytest.raises(InvalidTopicError, match=holds):
            node.admin.delete_topic(name)
        assert node.registry.get(name) is not None and node.metadata_cache.contains_topic(name)
        assert node.replica_manager.get_partition(TopicPartition(name, 0)) is not None
    node.admin.delete_topic("plain")
    assert node.registry.get("plain") is None


def test_internal_topics_cannot_grow(node: Node) -> None:
    node.admin.ensure_transaction_state()
    for name, count in ((OFFSETS, "offsets.topic.num.partitions"),
                        (TXN_STATE, "transaction.state.log.num.partitions")):  # fmt: skip
        before = node.metadata_cache.num_partitions(name)
        for validate_only in (True, False):
            with pytest.raises(InvalidTopicError, match=f"internal topic {name}.*{count}"):
                node.admin.add_partitions(name, 10, validate_only)
        assert node.metadata_cache.num_partitions(name) == before


@pytest.mark.parametrize(
    "overrides",
    [
        {"cleanup.policy": "delete"},
        {"cleanup.policy": "compact,delete"},
        {"cleanup.policy": "delete", "retention.ms": "1"},
        {},  # the broker's default, log.cleanup.policy=delete
        {"segment.bytes": "1048576"},  # replaces every override: compact is gone too
    ],
)
def test_configs_that_let_retention_delete_records_are_refused(
    node: Node, overrides: dict[str, str]
) -> None:
    node.admin.ensure_transaction_state()
    for name in (OFFSETS, TXN_STATE):
        before = node.overrides(name)
        with pytest.raises(PolicyViolation, match=f"{name} must keep cleanup.policy=compact"):
            node.admin.check_topic_configs(name, overrides)
        with pytest.raises(PolicyViolation):
            node.admin.update_topic_configs(name, overrides)
        assert node.overrides(name) == before
        assert node.admin.log_config_for(name).cleanup_policy == "compact"


def test_configs_that_keep_records_are_accepted(node: Node) -> None:
    overrides = {**OFFSETS_TOPIC_CONFIGS, "retention.ms": "1", "min.cleanable.dirty.ratio": "0.1"}
    node.admin.update_topic_configs(OFFSETS, overrides)
    assert node.overrides(OFFSETS) == overrides
    assert node.partition_log(TopicPartition(OFFSETS, 0)).config.retention_ms == 1
    # Any other topic may delete by retention, whatever the override.
    node.admin.create_topic("plain", 1, 1, {"cleanup.policy": "compact"})
    node.admin.update_topic_configs("plain", {"cleanup.policy": "delete"})


def test_a_compacting_broker_default_keeps_internal_topics_safe(tmp_path: Path) -> None:
    made = Node(tmp_path, **{"log.cleanup.policy": "compact"})
    try:
        made.admin.check_topic_configs(OFFSETS, {})
    finally:
        made.close()


def test_internal_topics_are_not_made_by_auto_creation_or_with_delete(node: Node) -> None:
    assert node.config["auto.create.topics.enable"]
    assert not node.admin.maybe_auto_create(TXN_STATE)
    assert node.registry.get(TXN_STATE) is None
    assert not node.metadata_cache.contains_topic(TXN_STATE)
    with pytest.raises(PolicyViolation):
        node.admin.create_topic(TXN_STATE, 2, 1, {"cleanup.policy": "delete"})
    with pytest.raises(PolicyViolation):
        node.admin.create_topic(TXN_STATE, 2, 1, {}, validate_only=True)
    assert node.registry.get(TXN_STATE) is None
    assert node.admin.maybe_auto_create("plain")  # other topics as before


def test_records_of_internal_topics_cannot_be_deleted(node: Node) -> None:
    tp = TopicPartition("t", 0)
    assert node.commit("g", tp, 5) == ErrorCode.none
    offsets_tp = TopicPartition(OFFSETS, node.group.partition_for("g"))
    log_ = node.partition_log(offsets_tp)
    assert log_.log_end_offset == 1
    out: list[dict[TopicPartition, tuple[int, ErrorCode]]] = []
    node.replica_manager.delete_records(1000, {offsets_tp: -1}, out.append)
    assert out == [{offsets_tp: (-1, ErrorCode.invalid_topic_exception)}]
    assert log_.log_start_offset == 0 and node.committed("g", tp) == 5


def test_a_missing_offsets_topic_is_made_again_and_coordinated(node: Node) -> None:
    tp = TopicPartition("t", 0)
    assert node.commit("g", tp, 5) == ErrorCode.none
    partitions = node.group.group_manager.num_partitions

    node.admin._delete_topic(OFFSETS)  # below the protection, as another tool could
    assert node.group.group_manager.owned_partitions == set()  # resigned: groups unloaded
    assert node.commit("g", tp, 6) == ErrorCode.not_coordinator  # the client looks again

    # What FindCoordinator does when the key's partition is missing.
    node.admin.create_internal_topic(OFFSETS, partitions, 1, dict(OFFSETS_TOPIC_CONFIGS))
    assert node.group.group_manager.owned_partitions == set(range(partitions))
    assert not node.group.group_manager.loading_partitions
    assert node.admin.log_config_for(OFFSETS).cleanup_policy == "compact"
    assert node.committed("g", tp) is None  # what the new, empty topic holds
    assert node.commit("g", tp, 7) == ErrorCode.none
    assert node.committed("g", tp) == 7
    offsets_tp = TopicPartition(OFFSETS, node.group.partition_for("g"))
    assert node.partition_log(offsets_tp).log_end_offset == 1


def test_a_missing_transaction_state_topic_is_made_again_and_coordinated(node: Node) -> None:
    node.admin.ensure_transaction_state()
    assert node.txn.is_active and set(node.txn.owned) == {0, 1}

    node.admin._delete_topic(TXN_STATE)
    assert not node.txn.is_active and node.registry.get(TXN_STATE) is None

    node.admin.ensure_transaction_state()  # what FindCoordinator and InitProducerId do
    assert set(node.txn.owned) == {0, 1} and not node.txn.loading
    assert node.admin.log_config_for(TXN_STATE).cleanup_policy == "compact"
