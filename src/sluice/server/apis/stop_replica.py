"""StopReplica (5): a controller request (cluster mode only), fenced by controller and broker
epoch, applied by this broker's :class:`~sluice.server.cluster.ClusterManager`.

kio has no schema for it: the request arrives decoded by :mod:`sluice.server.inter_broker`
(v1, the version Sluice's controller sends).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.controller.requests import StopReplicaRequest, StopReplicaResponse
from sluice.protocol.apis import InterBrokerApiKey
from sluice.server.apis import RawApiSpec

if TYPE_CHECKING:
    from sluice.server.cluster import ClusterManager

API = RawApiSpec(InterBrokerApiKey.STOP_REPLICA)


def handle(cluster: ClusterManager, request: StopReplicaRequest) -> StopReplicaResponse:
    return cluster.handle_stop_replica(request)
