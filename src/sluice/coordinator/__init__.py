"""Coordinators: the classic group coordinator (``sluice.coordinator.group``) and its
broker wiring (``sluice.server.group_runtime``)."""

from sluice.coordinator.group import GroupConfig, GroupCoordinator

__all__ = ["GroupConfig", "GroupCoordinator"]
