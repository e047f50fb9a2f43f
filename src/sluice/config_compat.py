"""Kafka broker keys Sluice accepts without honouring them, and the hints for the rest.

An operator's existing Kafka ``server.properties`` sizes thread pools and JVM metrics
reporters that Sluice's design has no counterpart for (one event loop serves every
connection and request). Those keys, listed in
:data:`IGNORED_BROKER_CONFIGS` with the reason each has no effect, are accepted and
named in one warning when the broker starts. Every other key Sluice does not know is
refused: a KRaft key (:data:`KRAFT_ONLY_PREFIXES`) says Sluice runs in ZooKeeper mode,
any other gets a "did you mean" from :func:`suggest`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Final

__all__ = [
    "IGNORED_BROKER_CONFIGS",
    "KRAFT_ONLY_CONFIGS",
    "KRAFT_ONLY_PREFIXES",
    "is_kraft_only",
    "suggest",
]

_THREADS = "Sluice serves every connection and request on one event loop"

IGNORED_BROKER_CONFIGS: Final[dict[str, str]] = {
    # Kafka 3.9 broker key -> why it has no effect in Sluice
    "num.network.threads": _THREADS,
    "num.io.threads": _THREADS,
    "background.threads": "background tasks run on the event loop",
    "queued.max.requests": (
        "requests are not queued between network and handler threads; "
        "queued.max.request.bytes bounds unanswered requests"
    ),
    "num.recovery.threads.per.data.dir": "Sluice has no recovery thread pool",
    "num.replica.alter.log.dirs.threads": "log-dir moves use one worker per log directory",
    "log.cleaner.threads": "Sluice runs one log cleaner",
    "replica.socket.receive.buffer.bytes": (
        "a follower's connections keep the system's receive buffer (TCP autotuning)"
    ),
    "log.flush.scheduler.interval.ms": (
        "flush.ms is checked about once a second, whatever this says"
    ),
    "zookeeper.clientCnxnSocket": "a Java ZooKeeper client setting",
    "zookeeper.max.in.flight.requests": "a Java ZooKeeper client setting",
    "metric.reporters": "Java metrics reporter classes",
    "metrics.num.samples": "Java metrics (Sluice's are its Prometheus endpoint, metrics.port)",
    "metrics.sample.window.ms": "Java metrics (Sluice's are its Prometheus endpoint, metrics.port)",
    "metrics.recording.level": "Java metrics (Sluice's are its Prometheus endpoint, metrics.port)",
    "auto.include.jmx.reporter": "JMX is Java's",
    "kafka.metrics.reporters": "Java metrics reporter classes",
    "kafka.metrics.polling.interval.secs": "Java metrics reporter classes",
}
"""Kafka broker keys accepted with a warning: each has no counterpart in Sluice."""

KRAFT_ONLY_CONFIGS: Final[frozenset[str]] = frozenset(
    {
        "process.roles",
        "node.id",
        "controller.listener.names",
        "metadata.log.dir",
        "initial.broker.registration.timeout.ms",
        "broker.heartbeat.interval.ms",
        "broker.session.timeout.ms",
    }
)
KRAFT_ONLY_PREFIXES: Final[tuple[str, ...]] = ("controller.quorum.", "metadata.log.")


def is_kraft_only(key: str) -> bool:
    """Whether ``key`` configures Kafka's KRaft mode, which Sluice does not run."""
    return key in KRAFT_ONLY_CONFIGS or key.startswith(KRAFT_ONLY_PREFIXES)


def suggest(key: str, known: Iterable[str]) -> str | None:
    """The known key closest to a mistyped ``key``, if one is close enough."""
    matches = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
    return matches[0] if matches else None
