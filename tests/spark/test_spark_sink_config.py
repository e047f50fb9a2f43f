"""The sink's client settings, without Spark or a broker: every ``kafka.*`` option,
security ones included, reaches the tasks' producers; the driver's consumer and admin
client get the servers and the security settings only."""

from __future__ import annotations

from sluice.client.consumer import consumer as consumer_module
from sluice.client.producer.producer_config import ProducerConfig
from sluice.spark import writer
from sluice.spark.options import WriterOptions

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'


def test_security_and_producer_settings_reach_every_client() -> None:
    options = WriterOptions.parse(
        {
            "kafka.bootstrap.servers": "127.0.0.1:9092",
            "topic": "out",
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": JAAS,
            "kafka.linger.ms": "20",
            "kafka.transactional.id": "etl-orders",
        }
    )
    producer = writer._producer_config(options)
    assert producer["security.protocol"] == "SASL_PLAINTEXT"
    assert producer["sasl.jaas.config"] == JAAS
    assert producer["linger.ms"] == "20"
    assert producer["transaction.timeout.ms"] == "900000"
    assert "transactional.id" not in producer  # a prefix of the tasks' ids
    assert writer._id_prefix(options, "sluice-spark-q") == "etl-orders"
    ProducerConfig({**producer, "transactional.id": "etl-orders-run-0-0"})  # accepted

    connection = writer._connection_config(options)
    assert connection == {
        "bootstrap.servers": "127.0.0.1:9092",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": JAAS,
    }
    assert set(connection) <= set(consumer_module._DEFAULTS)

    plain = WriterOptions.parse({"kafka.bootstrap.servers": "h:1", "transactional": "false"})
    assert "transaction.timeout.ms" not in writer._producer_config(plain)
    assert writer._id_prefix(plain, "sluice-spark") == "sluice-spark"
