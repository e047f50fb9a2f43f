"""The clients' one network stack: Kafka's ``NetworkClient`` over one connection per
broker, the blocking ``ConsumerNetworkClient`` over it, request building and metadata."""
