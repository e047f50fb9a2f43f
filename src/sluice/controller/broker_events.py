"""Brokers joining, leaving and bouncing (``onBrokerStartup``/``onBrokerFailure``).

:class:`BrokerEventHandler` is the part of :class:`~.kafka_controller.KafkaController`
that processes BrokerChange: a new broker gets full metadata and its replicas go
online; a dead broker's partitions go offline and get new leaders, and its replicas
leave every ISR; a bounced broker (same id, newer registration) is both.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .states import PartitionAndReplica, PartitionState, ReplicaState

if TYPE_CHECKING:
    from .kafka_controller import KafkaController

__all__ = ["BrokerEventHandler"]

log = logging.getLogger("sluice.controller")


class BrokerEventHandler:
    """Handles BrokerChange for the controller, on its event thread."""

    def __init__(self, controller: KafkaController) -> None:
        self.controller = controller

    def process_broker_change(self) -> None:
        ctx = self.controller.context
        current = self.controller.zk_client.get_all_broker_and_epochs_in_cluster(
            self.controller.broker_change_watch
        )
        current_epochs = {b.id: e for b, e in current.items()}
        known = ctx.live_or_shutting_down_broker_ids
        new_ids = set(current_epochs) - known
        dead_ids = known - set(current_epochs)
        bounced_ids = {
            b for b in set(current_epochs) & known if current_epochs[b] > ctx.live_broker_epochs[b]
        }
        log.info(
            "newly added brokers: %s, deleted brokers: %s, bounced brokers: %s, live brokers: %s",
            sorted(new_ids),
            sorted(dead_ids),
            sorted(bounced_ids),
            sorted(current_epochs),
        )
        new = {b: e for b, e in current.items() if b.id in new_ids}
        bounced = {b: e for b, e in current.items() if b.id in bounced_ids}
        for broker in new:
            self.controller.channel.add_broker(broker)
        for broker in bounced:
            self.controller.channel.remove_broker(broker.id)
            self.controller.channel.add_broker(broker)
        for broker_id in dead_ids:
            self.controller.channel.remove_broker(broker_id)
        if new_ids:
            ctx.add_live_brokers(new)
            self.on_broker_startup(new_ids)
        if bounced_ids:
            ctx.remove_live_brokers(bounced_ids)
            self.on_broker_failure(bounced_ids)
            ctx.add_live_brokers(bounced)
            self.on_broker_startup(bounced_ids)
        if dead_ids:
            ctx.remove_live_brokers(dead_ids)
            self.on_broker_failure(dead_ids)

    def on_broker_startup(self, new_brokers: set[int]) -> None:
        log.info("new broker startup callback for %s", sorted(new_brokers))
        ctx = self.controller.context
        self.controller.send_update_metadata(
            set(), ctx.live_or_shutting_down_broker_ids - new_brokers
        )
        self.controller.send_update_metadata(None, new_brokers)
        replicas = ctx.replicas_on_brokers(new_brokers)
        self.controller.replica_state_machine.handle_state_changes(
            replicas, ReplicaState.ONLINE_REPLICA
        )
        self.controller.partition_state_machine.trigger_online_partition_state_change()
        # Reassignments moving to a returning broker send it LeaderAndIsr again.
        self.controller.reassignments.maybe_resume_reassignments(
            lambda tp, assignment: any(r in new_brokers for r in assignment.target_replicas)
        )
        deleting = {r.topic_partition.topic for r in replicas} & ctx.topics_to_be_deleted
        if deleting:
            self.controller.topic_deletion_manager.resume_deletion_for_topics(deleting)

    def on_broker_failure(self, dead_brokers: set[int]) -> None:
        log.info("broker failure callback for %s", sorted(dead_brokers))
        self.controller.context.shutting_down_broker_ids -= dead_brokers
        self.on_replicas_become_offline(self.controller.context.replicas_on_brokers(dead_brokers))

    def on_replicas_become_offline(self, replicas: set[PartitionAndReplica]) -> None:
        ctx = self.controller.context
        deleting = {
            r for r in replicas if ctx.is_topic_queued_up_for_deletion(r.topic_partition.topic)
        }
        not_deleting = replicas - deleting
        offline_leader = {
            tp
            for tp, info in ctx.partition_leadership_info.items()
            if not ctx.is_replica_online(info.leader_and_isr.leader, tp)
            and not ctx.is_topic_queued_up_for_deletion(tp.topic)
        }
        psm = self.controller.partition_state_machine
        psm.handle_state_changes(offline_leader, PartitionState.OFFLINE_PARTITION)
        results = psm.trigger_online_partition_state_change()
        self.controller.replica_state_machine.handle_state_changes(
            not_deleting, ReplicaState.OFFLINE_REPLICA
        )
        if deleting:
            self.controller.topic_deletion_manager.fail_replica_deletion(deleting)
        if not not_deleting and all(isinstance(r, Exception) for r in results.values()):
            self.controller.send_update_metadata(set(), ctx.live_or_shutting_down_broker_ids)
