"""LeaderAndIsr (4): a controller request (cluster mode only), fenced by controller and broker
epoch, applied by this broker's :class:`~sluice.server.cluster.ClusterManager`.

kio has no schema for it: the request arrives decoded by :mod:`sluice.server.inter_broker`
(v2, the version Sluice's controller sends).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.controller.requests import LeaderAndIsrRequest, LeaderAndIsrResponse
from sluice.protocol.apis import InterBrokerApiKey
from sluice.server.apis import RawApiSpec

if TYPE_CHECKING:
    from sluice.server.cluster import ClusterManager

API = RawApiSpec(InterBrokerApiKey.LEADER_AND_ISR)


def handle(cluster: ClusterManager, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    return cluster.handle_leader_and_isr(request)
