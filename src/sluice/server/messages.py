"""Message building for the request handlers (see :mod:`sluice.protocol.build`)."""

from sluice.protocol.build import build, field, ms

__all__ = ["build", "field", "ms"]
