"""StopReplica (5): a controller request (cluster mode only), fenced by controller and broker
epoch, applied by this broker's :class:`~sluice.server.cluster.ClusterManager`.

kio has no schema for it: the request arrives decoded by :mod:`sluice.server.inter_broker`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.controller.requests import StopReplicaRequest, StopReplicaResponse

if TYPE_CHECKING:
    from sluice.server.cluster import ClusterManager


def handle(cluster: ClusterManager, request: StopReplicaRequest) -> StopReplicaResponse:
    return cluster.handle_stop_replica(request)
