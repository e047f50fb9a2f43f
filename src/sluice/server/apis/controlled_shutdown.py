"""ControlledShutdown (7): a broker asks the controller to move its leaders away before
it stops. Served by the active controller only; answered when the controller's event
thread has processed the request.

kio has no schema for it: the request arrives decoded by :mod:`sluice.server.inter_broker`
(v2, which carries the broker epoch so that a restarted broker's stale request is refused).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sluice.controller.events import ControlledShutdownResult
from sluice.protocol import ErrorCode
from sluice.protocol.apis import InterBrokerApiKey
from sluice.server.apis import RawApiSpec

if TYPE_CHECKING:
    from sluice.server.cluster import ClusterManager
    from sluice.server.inter_broker import ControlledShutdownRequest

API = RawApiSpec(InterBrokerApiKey.CONTROLLED_SHUTDOWN)


async def handle(
    cluster: ClusterManager, request: ControlledShutdownRequest
) -> ControlledShutdownResult:
    from sluice.server.group_runtime import answer_from_thread

    controller = cluster.active_controller
    if controller is None:
        return ControlledShutdownResult(ErrorCode.not_controller)
    result: ControlledShutdownResult = await answer_from_thread(
        lambda done: controller.controlled_shutdown(request.broker_id, request.broker_epoch, done)
    )
    return result
