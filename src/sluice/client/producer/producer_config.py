"""The producer's configuration keys and defaults (Kafka 4.x's ``ProducerConfig``).

Defaults follow the current Java client: ``acks=all``, ``enable.idempotence=true``,
``linger.ms=5`` (KIP-1030, Kafka 4.0; it was 0 before), ``batch.size=16384``,
``buffer.memory=33554432``, ``max.block.ms=60000``, ``delivery.timeout.ms=120000``,
``retries=2147483647``, ``max.in.flight.requests.per.connection=5``. The same
cross-checks apply: idempotence needs acks=all, retries > 0 and at most 5
requests in flight (set explicitly and violated: an error; left at its default:
idempotence is turned off), and delivery.timeout.ms must cover linger.ms +
request.timeout.ms.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from typing import Any

from sluice.client.config import (
    BOOL,
    CALLABLE,
    COMMON_CLIENT_CONFIGS,
    INT,
    STRING,
    ConfigDef,
    ConfigKey,
    at_least,
    between,
    one_of,
    parse_bootstrap_servers,
)
from sluice.client.errors import ConfigException
from sluice.protocol.records.compression import CompressionType

__all__ = ["PRODUCER_CONFIG", "ProducerConfig"]

log = logging.getLogger(__name__)

PRODUCER_CONFIG = ConfigDef(
    "producer",
    (
        *COMMON_CLIENT_CONFIGS,
        ConfigKey("acks", STRING, "all", "Acknowledgements: 0, 1 or all (-1)",
                  one_of("all", "-1", "0", "1")),
        ConfigKey("linger.ms", INT, 5, "Wait up to this long for more records per batch",
                  at_least(0)),
        ConfigKey("batch.size", INT, 16_384, "Bytes per batch (per partition)", at_least(0)),
        ConfigKey("buffer.memory", INT, 33_554_432, "Memory for records waiting to be sent",
                  at_least(0)),
        ConfigKey("max.block.ms", INT, 60_000, "How long send() may block (metadata, memory)",
                  at_least(0)),
        ConfigKey("max.request.size", INT, 1_048_576, "Largest Produce request, in bytes",
                  at_least(0)),
        ConfigKey("compression.type", STRING, "none", "none, gzip, snappy, lz4 or zstd",
                  one_of("none", "gzip", "snappy", "lz4", "zstd")),
        ConfigKey("compression.gzip.level", INT, -1, "gzip level (1-9, -1: default)",
                  between(-1, 9)),
        ConfigKey("compression.lz4.level", INT, 9, "lz4 level (1-17)", between(1, 17)),
        ConfigKey("compression.zstd.level", INT, 3, "zstd level (-131072-22)",
                  between(-131072, 22)),
        ConfigKey("retries", INT, 2_147_483_647, "Retries of a failed batch", at_least(0)),
        ConfigKey("delivery.timeout.ms", INT, 120_000, "Upper bound on reporting a send's "
                  "outcome", at_least(0)),
        ConfigKey("max.in.flight.requests.per.connection", INT, 5,
                  "Unacknowledged requests per connection", at_least(1)),
        ConfigKey("enable.idempotence", BOOL, True, "Exactly one copy of each record per "
                  "partition, in order"),
        ConfigKey("partitioner.class", CALLABLE, None,
                  "partitioner(topic, key, value, cluster) -> partition; None: built-in"),
        ConfigKey("partitioner.ignore.keys", BOOL, False, "Sticky partitioning for keyed "
                  "records too"),
        ConfigKey("partitioner.adaptive.partitioning.enable", BOOL, True,
                  "Prefer partitions with shorter queues"),
        ConfigKey("partitioner.availability.timeout.ms", INT, 0, "Only 0 is supported",
                  between(0, 0)),
        ConfigKey("metadata.max.idle.ms", INT, 300_000, "Forget topics unused this long",
                  at_least(5000)),
        ConfigKey("key.serializer", CALLABLE, None, "serializer(topic, key) -> bytes"),
        ConfigKey("value.serializer", CALLABLE, None, "serializer(topic, value) -> bytes"),
        ConfigKey("transactional.id", STRING, None, "Id of a transactional producer "
                  "(implies idempotence)"),
        ConfigKey("transaction.timeout.ms", INT, 60_000, "The coordinator aborts a "
                  "transaction open longer than this", at_least(1)),
    ),
)  # fmt: skip

_producer_ids = itertools.count(1)


class ProducerConfig:
    """Validated producer settings (``values`` holds every key, typed)."""

    def __init__(self, props: Mapping[str, Any]) -> None:
        values, user_set = PRODUCER_CONFIG.parse(props)
        self.values = values
        self.user_set = user_set
        self.bootstrap = parse_bootstrap_servers(values["bootstrap.servers"])
        self.client_id: str = values["client.id"] or f"producer-{next(_producer_ids)}"
        self.acks = -1 if values["acks"] in ("all", "-1") else int(values["acks"])
        self.compression = CompressionType.for_name(values["compression.type"])
        self.compression_level = self._compression_level()
        self.transactional_id: str | None = values["transactional.id"] or None
        self.idempotence = self._idempotence()
        if self.transactional_id is not None and not self.idempotence:
            raise ConfigException("Cannot set a transactional.id without also enabling "
                                  "idempotence.")  # fmt: skip
        self.delivery_timeout_ms = self._delivery_timeout()
        if self.values["batch.size"] < 1:
            self.values["batch.size"] = 1  # Java treats 0 as "no batching": one record each

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def _compression_level(self) -> int | None:
        if self.compression == CompressionType.GZIP:
            level = self.values["compression.gzip.level"]
            return None if level == -1 else level
        if self.compression == CompressionType.LZ4:
            return int(self.values["compression.lz4.level"])
        if self.compression == CompressionType.ZSTD:
            return int(self.values["compression.zstd.level"])
        return None

    def _idempotence(self) -> bool:
        values = self.values
        explicit = "enable.idempotence" in self.user_set
        if not values["enable.idempotence"]:
            return False
        conflicts = []
        if self.acks != -1:
            conflicts.append("Must set acks to all in order to use the idempotent producer. "
                             "Otherwise we cannot guarantee idempotence.")  # fmt: skip
        if values["retries"] == 0:
            conflicts.append("Must set retries to non-zero when using the idempotent producer.")
        if values["max.in.flight.requests.per.connection"] > 5:
            conflicts.append("Must set max.in.flight.requests.per.connection to at most 5 to "
                             "use the idempotent producer.")  # fmt: skip
        if not conflicts:
            return True
        if explicit:
            raise ConfigException(" ".join(conflicts))
        log.info("Idempotence will be disabled because %s", " ".join(conflicts))
        return False

    def _delivery_timeout(self) -> int:
        values = self.values
        delivery = int(values["delivery.timeout.ms"])
        minimum = int(values["linger.ms"]) + int(values["request.timeout.ms"])
        if delivery < minimum:
            if "delivery.timeout.ms" in self.user_set:
                raise ConfigException("delivery.timeout.ms should be equal to or larger than "
                                      "linger.ms + request.timeout.ms")  # fmt: skip
            log.warning("delivery.timeout.ms should be equal to or larger than linger.ms + "
                        "request.timeout.ms. Setting it to %d.", minimum)  # fmt: skip
            delivery = minimum
        return delivery
