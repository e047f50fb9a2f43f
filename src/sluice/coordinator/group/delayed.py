"""The group coordinator's delayed operations: DelayedJoin, InitialDelayedJoin,
DelayedSync and DelayedHeartbeat. Each shares its group's lock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.purgatory import DelayedOperation, DelayedOperationPurgatory

if TYPE_CHECKING:
    from sluice.coordinator.group.coordinator import GroupCoordinator
    from sluice.coordinator.group.metadata import GroupMetadata

__all__ = [
    "DelayedHeartbeat",
    "DelayedJoin",
    "DelayedSync",
    "InitialDelayedJoin",
    "join_key",
    "member_key",
    "sync_key",
]


def join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


def member_key(group_id: str, member_id: str) -> tuple[str, str]:
    return (group_id, member_id)


class DelayedJoin(DelayedOperation):
    """A rebalance waiting for every known member to rejoin, or for the rebalance timeout
    (after which members that did not rejoin are removed)."""

    __slots__ = ("coordinator", "group")

    def __init__(self, coordinator: GroupCoordinator, group: GroupMetadata, delay_ms: int) -> None:
        super().__init__(delay_ms, lock=group.lock)
        self.coordinator = coordinator
        self.group = group

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_join(self.group, self.force_complete)

    def on_complete(self) -> None:
        self.coordinator.on_complete_join(self.group)

    def on_expiration(self) -> None:
        pass


class InitialDelayedJoin(DelayedJoin):
    """The first rebalance of an empty group waits ``group.initial.rebalance.delay.ms``,
    again each time a new member joins meanwhile, up to the rebalance timeout."""

    __slots__ = ("configured_delay_ms", "purgatory", "remaining_ms")

    def __init__(
        self,
        coordinator: GroupCoordinator,
        purgatory: DelayedOperationPurgatory[DelayedOperation],
        group: GroupMetadata,
        configured_delay_ms: int,
        delay_ms: int,
        remaining_ms: int,
    ) -> None:
        super().__init__(coordinator, group, delay_ms)
        self.purgatory = purgatory
        self.configured_delay_ms = configured_delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        with self.group.lock:
            if self.group.new_member_added and self.remaining_ms != 0:
                self.group.new_member_added = False
                delay = min(self.configured_delay_ms, self.remaining_ms)
                remaining = max(self.remaining_ms - self.delay_ms, 0)
                self.purgatory.try_complete_else_watch(
                    InitialDelayedJoin(
                        self.coordinator,
                        self.purgatory,
                        self.group,
                        self.configured_delay_ms,
                        delay,
                        remaining,
                    ),
                    [join_key(self.group.group_id)],
                )
            else:
                super().on_complete()


class DelayedSync(DelayedOperation):
    """After a join completes, members must send SyncGroup within the rebalance timeout;
    those that do not are removed and the group rebalances."""

    __slots__ = ("coordinator", "generation_id", "group")

    def __init__(
        self, coordinator: GroupCoordinator, group: GroupMetadata, generation_id: int, delay_ms: int
    ) -> None:
        super().__init__(delay_ms, lock=group.lock)
        self.coordinator = coordinator
        self.group = group
        self.generation_id = generation_id

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_pending_sync(
            self.group, self.generation_id, self.force_complete
        )

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_pending_sync(self.group, self.generation_id)


class DelayedHeartbeat(DelayedOperation):
    """A member's session: expires unless a heartbeat (or join, sync, commit) arrives
    within the session timeout; expiry removes the member and rebalances the group."""

    __slots__ = ("coordinator", "group", "is_pending", "member_id")

    def __init__(
        self,
        coordinator: GroupCoordinator,
        group: GroupMetadata,
        member_id: str,
        is_pending: bool,
        timeout_ms: int,
    ) -> None:
        super().__init__(timeout_ms, lock=group.lock)
        self.coordinator = coordinator
        self.group = group
        self.member_id = member_id
        self.is_pending = is_pending

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_heartbeat(
            self.group, self.member_id, self.is_pending, self.force_complete
        )

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_heartbeat(self.group, self.member_id, self.is_pending)
