"""ListTransactions (66): the transactional ids this broker coordinates, filtered by state,
producer id and (v1) minimum duration of the open transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sluice.protocol import ApiKey, ErrorCode, Request
from sluice.server.apis import ApiSpec
from sluice.server.auth_helper import AclOperation, ResourceType, authorize
from sluice.server.messages import build, field

if TYPE_CHECKING:
    from typing import TypeAlias

    import kio.schema.list_transactions.v0.request as v0
    import kio.schema.list_transactions.v1.request as v1

    from sluice.server.request_context import RequestContext

    Body: TypeAlias = v0.ListTransactionsRequest | v1.ListTransactionsRequest

API: ApiSpec[Body] = ApiSpec(ApiKey.LIST_TRANSACTIONS, 0, 1)


def handle(ctx: RequestContext, request: Request) -> Any:
    from sluice.coordinator.transaction import TransactionState

    body = API.body(request)
    states: set[TransactionState] = set()
    unknown = []
    for name in body.state_filters:
        state = TransactionState.from_name(name)
        if state is None:
            unknown.append(name)
        else:
            states.add(state)
    producer_ids = {int(p) for p in body.producer_id_filters}
    if unknown and not states:
        listed = []  # only unknown states asked for: nothing matches
    else:
        listed = ctx.txn_coordinator.handle_list(
            states or None, producer_ids or None, int(field(body, "duration_filter", -1))
        )
    listed = [  # as Kafka: those it may describe
        m for m in listed
        if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.transactional_id)
    ]  # fmt: skip
    return build(
        request.response_type, throttle_time=0, error_code=ErrorCode.none,
        unknown_state_filters=unknown,
        transaction_states=[
            {"transactional_id": m.transactional_id, "producer_id": m.producer_id,
             "transaction_state": m.state.state_name}
            for m in listed
        ],
    )  # fmt: skip
