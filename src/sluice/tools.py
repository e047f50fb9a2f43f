"""Kafka-style command-line tools (topics, console producer and consumer)."""

from __future__ import annotations

import argparse

__all__ = ["add_tool_parsers"]


def add_tool_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the tool subcommands (filled in as the admin client lands)."""
