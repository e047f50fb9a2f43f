"""AddPartitionsToTxn v4-5, the batched form a partition leader sends to a transaction
coordinator (KIP-890): raw requests to a broker. Several transactions in one request, one
added to and one verified; VerifyOnly answers per partition NONE or TRANSACTION_ABORTABLE
(INVALID_TXN_STATE to v4), a fenced epoch PRODUCER_FENCED, an unknown topic
UNKNOWN_TOPIC_OR_PARTITION with the rest not attempted."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.protocol import ErrorCode
from sluice.protocol.apis import request_type
from sluice.server.messages import build
from sluice.testing import EmbeddedBroker
from support.clients import create_topic
from support.waiting import wait_until
from support.wire import RawClient

pytestmark = pytest.mark.integration


def _init(client: RawClient, txn_id: str) -> tuple[int, int]:
    request = build(request_type(22, 4), transactional_id=txn_id, transaction_timeout=60_000,
                    producer_id=-1, producer_epoch=-1)  # fmt: skip
    answers: list[Any] = []

    def ready() -> bool:
        answers.append(client.request(request))
        return bool(answers[-1].error_code == ErrorCode.none)

    wait_until(ready, 30, f"a producer id for {txn_id}")
    return int(answers[-1].producer_id), int(answers[-1].producer_epoch)


def _batch(version: int, *transactions: tuple[str, int, int, bool, dict[str, list[int]]]) -> Any:
    return build(request_type(24, version), transactions=[
        {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
         "verify_only": verify,
         "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        for txn_id, pid, epoch, verify, topics in transactions
    ])  # fmt: skip


def _errors(body: Any) -> dict[str, dict[tuple[str, int], ErrorCode]]:
    assert body.error_code == ErrorCode.none
    return {
        r.transactional_id: {
            (t.name, p.partition_index): p.partition_error_code
            for t in r.topic_results for p in t.results_by_partition
        }
        for r in body.results_by_transaction
    }  # fmt: skip


def test_batched_add_and_verify() -> None:
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, "t", 2)
        client = RawClient(bootstrap)
        try:
            a_pid, a_epoch = _init(client, "a")
            b_pid, b_epoch = _init(client, "b")
            added = _errors(client.request(_batch(
                5, ("a", a_pid, a_epoch, False, {"t": [0]}),
                ("b", b_pid, b_epoch, False, {"t": [1], "nope": [0]}),
            )))  # fmt: skip
            assert added == {
                "a": {("t", 0): ErrorCode.none},
                "b": {("t", 1): ErrorCode.operation_not_attempted,
                      ("nope", 0): ErrorCode.unknown_topic_or_partition},
            }  # fmt: skip
            verified = _errors(client.request(_batch(
                5, ("a", a_pid, a_epoch, True, {"t": [0, 1]}),
                ("b", b_pid, b_epoch + 1, True, {"t": [1]}),
            )))  # fmt: skip
            assert verified == {
                "a": {("t", 0): ErrorCode.none, ("t", 1): ErrorCode.transaction_abortable},
                "b": {("t", 1): ErrorCode.producer_fenced},
            }
            older = _errors(client.request(_batch(4, ("a", a_pid, a_epoch, True, {"t": [1]}))))
            assert older == {"a": {("t", 1): ErrorCode.invalid_txn_state}}
        finally:
            client.close()


def test_the_batched_form_needs_cluster_action_under_an_authorizer() -> None:
    """Only brokers send v4+: Kafka answers CLUSTER_AUTHORIZATION_FAILED without
    CLUSTER_ACTION on the cluster."""
    config = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
    }
    with EmbeddedBroker(config=config) as broker:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, "t", 1)
        client = RawClient(bootstrap)
        try:
            pid, epoch = _init(client, "a")
            allowed = _errors(client.request(_batch(5, ("a", pid, epoch, True, {"t": [0]}))))
            assert allowed == {"a": {("t", 0): ErrorCode.transaction_abortable}}
            deny = build(request_type(30, 3), creations=[{
                "resource_type": 4, "resource_name": "kafka-cluster", "resource_pattern_type": 3,
                "principal": "User:ANONYMOUS", "host": "*", "operation": 9,  # CLUSTER_ACTION
                "permission_type": 2,
            }])  # fmt: skip
            assert client.request(deny).results[0].error_code == ErrorCode.none
            refused = client.request(_batch(5, ("a", pid, epoch, True, {"t": [0]})))
            assert refused.error_code == ErrorCode.cluster_authorization_failed
            assert list(refused.results_by_transaction) == []
        finally:
            client.close()
