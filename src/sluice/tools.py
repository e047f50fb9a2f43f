"""Kafka-style command-line tools: ``sluice topics``, ``console-producer`` and
``console-consumer``.

The commands live in :mod:`sluice.tools_impl`; the Kafka client they use is
imported only when a tool runs, so ``sluice broker`` never needs it.
"""

from __future__ import annotations

import argparse

__all__ = ["add_tool_parsers"]


def add_tool_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``topics``, ``console-producer`` and ``console-consumer`` on ``sub``."""
    from sluice.tools_impl import console_consumer, console_producer, topics

    topics.add_parser(sub)
    console_producer.add_parser(sub)
    console_consumer.add_parser(sub)
