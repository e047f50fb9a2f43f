"""UpdateMetadata (6): a controller request (cluster mode only), fenced by controller and broker
epoch, applied by this broker's :class:`~sluice.server.cluster.ClusterManager`.

It feeds the broker's metadata cache.

kio has no schema for it: the request arrives decoded by :mod:`sluice.server.inter_broker`
(v5, the version Sluice's controller sends).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.controller.requests import UpdateMetadataRequest, UpdateMetadataResponse
from sluice.protocol.apis import InterBrokerApiKey
from sluice.server.apis import RawApiSpec

if TYPE_CHECKING:
    from sluice.server.cluster import ClusterManager

API = RawApiSpec(InterBrokerApiKey.UPDATE_METADATA)


def handle(cluster: ClusterManager, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
    return cluster.handle_update_metadata(request)
