"""LeaderAndIsr (4): a controller request (cluster mode), fenced by controller and broker epoch.

kio has no schema for it: the request arrives decoded by :mod:`sluice.server.inter_broker`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.controller.requests import LeaderAndIsrResponse
from sluice.protocol import ErrorCode

if TYPE_CHECKING:
    from sluice.server.broker import Broker


def handle(broker: Broker, request: Any) -> LeaderAndIsrResponse:
    if broker.cluster is None:  # not in a cluster: no controller may address us
        return LeaderAndIsrResponse(ErrorCode.stale_controller_epoch)
    return broker.cluster.handle_leader_and_isr(request)  # type: ignore[no-any-return]
