"""A consume-transform-produce process for the exactly-once test: reads ``source`` with
read_committed, writes ``out-<value>`` to ``sink`` and commits its input offsets in the
same transaction (send_offsets_to_transaction), a few records per transaction, forever.
The test kill -9s it (and the broker) at random points.

Usage: python txn_transform.py BOOTSTRAP SOURCE SINK GROUP TRANSACTIONAL_ID
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def main() -> None:
    bootstrap, source, sink, group, txn_id = sys.argv[1:6]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "isolation.level": "read_committed",
        }
    )  # fmt: skip
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 2,
         "transaction.timeout.ms": 10000}
    )  # fmt: skip
    producer.init_transactions(60)
    committed = consumer.committed([TopicPartition(source, 0)], timeout=60)
    consumer.assign(committed)
    print("ready", committed[0].offset, flush=True)
    while True:
        producer.begin_transaction()
        batch = 0
        while batch < 7:
            msg = consumer.poll(0.2)
            if msg is None:
                if batch:
                    break
                continue
            if msg.error():
                continue
            producer.produce(sink, key=msg.key(), value=b"out-" + msg.value())
            batch += 1
        try:
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
            )
            producer.commit_transaction(30)
            print("committed", batch, flush=True)
        except KafkaException as exc:
            print("transaction failed:", exc, flush=True)
            sys.exit(3)


if __name__ == "__main__":
    main()
