"""The producer (Kafka's ``KafkaProducer`` design): record accumulator, buffer pool,
batches, the Sender, partitioning, idempotence and transactions."""
