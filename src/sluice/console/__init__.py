"""The broker's web console (``console.port``): a one-page app and a JSON API served
on the broker's event loop, acting through Kafka clients of the broker itself
(docs/console.md)."""

from __future__ import annotations

from sluice.console.server import Console
from sluice.console.sessions import ConsoleListener, ListenerInfo, console_listener

__all__ = ["Console", "ConsoleListener", "ListenerInfo", "console_listener"]
