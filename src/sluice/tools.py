"""Kafka-style command-line tools: ``sluice topics``, ``console-producer``,
``console-consumer`` and ``consumer-groups``.

The commands live in :mod:`sluice.tools_impl`; they use Sluice's own clients
(:mod:`sluice.client`), imported only when a tool runs.
"""

from __future__ import annotations

import argparse

__all__ = ["add_tool_parsers"]


def add_tool_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``topics``, ``console-producer``, ``console-consumer`` and
    ``consumer-groups`` on ``sub``."""
    from sluice.tools_impl import console_consumer, console_producer, consumer_groups, topics

    topics.add_parser(sub)
    console_producer.add_parser(sub)
    console_consumer.add_parser(sub)
    consumer_groups.add_parser(sub)
