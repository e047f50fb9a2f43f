"""ControlledShutdown (7): a broker asks the controller to move its leaders away before
it stops. Served by the active controller only; answered when the controller's event
thread has processed the request.

kio has no schema for it: the request arrives decoded by :mod:`sluice.server.inter_broker`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from sluice.controller.events import ControlledShutdownResult
from sluice.protocol import ErrorCode

if TYPE_CHECKING:
    from sluice.server.broker import Broker


async def handle(broker: Broker, broker_id: int, broker_epoch: int) -> ControlledShutdownResult:
    cluster = broker.cluster
    controller = cluster.controller if cluster is not None else None
    if controller is None or not controller.is_active:
        return ControlledShutdownResult(ErrorCode.not_controller)
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[ControlledShutdownResult] = loop.create_future()

    def done(result: ControlledShutdownResult) -> None:  # on the controller's thread
        def settle() -> None:
            if not answer.done():
                answer.set_result(result)

        loop.call_soon_threadsafe(settle)

    controller.controlled_shutdown(broker_id, broker_epoch, done)
    return await answer
