"""Request controls on a handler table, without a broker: which control acts, when one
is used up, delays, drops, registration from another thread and across restarts."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v4.request import (
    FindCoordinatorRequest as FindCoordinatorRequestV4,
)
from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
from kio.schema.types import BrokerId

from sluice.protocol import ApiKey, ErrorCode, Request, RequestHeader
from sluice.testing import DropConnection, RequestControls, respond

FIND = int(ApiKey.FIND_COORDINATOR)
METADATA = int(ApiKey.METADATA)


def _request(body: Any = None) -> Request:
    body = body if body is not None else FindCoordinatorRequest(key="g", key_type=0)
    header = RequestHeader(body.__api_key__, body.__version__, 7, "test", 1)
    return Request(header, body)


class Table:
    """A handler table as a broker has one, on an event loop of its own thread."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.handlers: dict[int, Callable[[object, Request], Any]] = {
            FIND: self._real(FIND),
            METADATA: self._real(METADATA),
        }
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def _real(self, key: int) -> Callable[[object, Request], Any]:
        def handle(_ctx: object, _request: Request) -> str:
            self.calls.append(key)
            return f"real {key}"

        return handle

    def run(self, fn: Callable[[], Any]) -> Any:
        async def call() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(10)

    def send(self, key: int = FIND, request: Request | None = None) -> Any:
        """One request through the table; an awaitable answer is awaited."""

        async def call() -> Any:
            answer = self.handlers[key](None, request or _request())
            if asyncio.iscoroutine(answer):
                answer = await answer
            return answer

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(10)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def table() -> Iterator[Table]:
    t = Table()
    yield t
    t.close()


def _attached(table: Table) -> RequestControls:
    controls = RequestControls(timeout_s=10)
    table.run(lambda: controls.attach(table.handlers))
    return controls


def test_a_control_acts_once_then_the_real_handler_answers(table: Table) -> None:
    controls = _attached(table)
    control = controls.add(FIND, lambda request: "controlled")
    assert table.send() == "controlled"
    assert table.send() == "real 10"
    assert (control.seen, control.acted, control.active) == (1, 1, False)
    assert table.calls == [FIND]


def test_a_kept_control_acts_on_every_request(table: Table) -> None:
    controls = _attached(table)
    control = controls.add(FIND, lambda request: "controlled", keep=True)
    assert [table.send() for _ in range(3)] == ["controlled"] * 3
    assert control.acted == 3 and control.active
    control.remove()
    assert table.send() == "real 10"


def test_none_passes_the_request_on_and_keeps_the_control(table: Table) -> None:
    """A control waits for the request it is after: the second one here."""
    controls = _attached(table)
    seen: list[int] = []

    def second(request: Request) -> str | None:
        seen.append(request.header.correlation_id)
        return "second" if len(seen) == 2 else None

    control = controls.add(FIND, second)
    assert [table.send(), table.send(), table.send()] == ["real 10", "second", "real 10"]
    assert (control.seen, control.acted) == (2, 1)


def test_controls_are_asked_in_order_and_the_first_that_acts_decides(table: Table) -> None:
    controls = _attached(table)
    passing = controls.add(FIND, lambda request: None)
    first = controls.add(FIND, lambda request: "first")
    second = controls.add(FIND, lambda request: "second")
    assert table.send() == "first"
    assert table.send() == "second"
    assert table.send() == "real 10"
    assert (passing.seen, first.acted, second.acted) == (3, 1, 1)


def test_other_keys_are_not_wrapped(table: Table) -> None:
    real_metadata = table.handlers[METADATA]
    controls = _attached(table)
    controls.add(FIND, lambda request: "controlled")
    assert table.handlers[METADATA] is real_metadata
    assert table.send(METADATA) == "real 3"


def test_an_awaitable_delays_then_the_real_handler_answers(table: Table) -> None:
    controls = _attached(table)
    released = asyncio.Event()

    async def held() -> None:
        await released.wait()

    controls.add(FIND, lambda request: held())
    pending = asyncio.run_coroutine_threadsafe(_send_async(table), table.loop)
    assert table.send() == "real 10"  # the control is used up: the next one is not held
    assert not pending.done()
    table.run(released.set)
    assert pending.result(10) == "real 10"
    assert table.calls == [FIND, FIND]


async def _send_async(table: Table) -> Any:
    answer = table.handlers[FIND](None, _request())
    return await answer


def test_an_awaitable_may_answer_itself(table: Table) -> None:
    controls = _attached(table)

    async def later() -> str:
        await asyncio.sleep(0.001)
        return "later"

    controls.add(FIND, lambda request: later())
    assert table.send() == "later"
    assert table.calls == []


def test_drop_connection_is_raised_to_the_network_layer(table: Table) -> None:
    controls = _attached(table)

    def drop(request: Request) -> None:
        raise DropConnection

    control = controls.add(FIND, drop)
    with pytest.raises(DropConnection):
        table.send()
    assert control.acted == 1 and not control.active
    assert table.send() == "real 10"


def test_a_key_the_broker_does_not_serve_is_refused(table: Table) -> None:
    controls = _attached(table)
    with pytest.raises(ValueError, match="API key 0"):
        controls.add(int(ApiKey.PRODUCE), lambda request: None)
    assert len(controls) == 0


def test_controls_added_before_attach_apply_once_attached(table: Table) -> None:
    controls = RequestControls(timeout_s=10)
    controls.add(FIND, lambda request: "early")
    assert table.send() == "real 10"  # not attached yet
    table.run(lambda: controls.attach(table.handlers))
    assert table.send() == "early"


def test_controls_carry_over_to_the_next_attach(table: Table) -> None:
    """A restarted broker (a new handler table) gets the controls still registered."""
    controls = _attached(table)
    controls.add(FIND, lambda request: "kept", keep=True)
    table.run(controls.detach)
    restarted = Table()
    try:
        restarted.run(lambda: controls.attach(restarted.handlers))
        assert restarted.send() == "kept"
    finally:
        restarted.close()


def test_a_control_may_register_another(table: Table) -> None:
    controls = _attached(table)

    def chain(request: Request) -> str:
        controls.add(METADATA, lambda request: "chained")
        return "first"

    controls.add(FIND, chain)
    assert table.send() == "first"
    assert table.send(METADATA) == "chained"


def test_respond_builds_the_response_of_the_request_version() -> None:
    request = _request(FindCoordinatorRequestV4(key_type=0, coordinator_keys=("g1", "g2")))
    response = respond(
        request,
        coordinators=[
            {"key": k, "node_id": -1, "host": "", "port": -1,
             "error_code": ErrorCode.coordinator_not_available}
            for k in request.body.coordinator_keys
        ],
        error_code=ErrorCode.coordinator_not_available,  # v0-v3 only: ignored here
    )  # fmt: skip
    assert isinstance(response, FindCoordinatorResponse)
    assert [c.key for c in response.coordinators] == ["g1", "g2"]
    assert response.coordinators[0].node_id == BrokerId(-1)
    assert response.coordinators[0].error_code is ErrorCode.coordinator_not_available
