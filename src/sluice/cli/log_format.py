"""How Sluice's processes write their log: the level, and text or JSON lines.

Sluice logs through Python's standard :mod:`logging`; this module is the one place that
sets it up for a process (``sluice broker``, ``sluice demo``). The text format is one
line per event, as Kafka's log4j layout writes it::

    [2026-11-28 17:40:12,345] INFO sluice.server.cluster: [Broker id=1] ...

The JSON format (``--log-format json``, :class:`JsonFormatter`) writes one JSON object
per line with ``ts`` (ISO 8601, UTC, milliseconds), ``level``, ``logger`` and
``message``, plus the structured fields the event carries: the ids a log call passes in
``extra`` (``topic``, ``partition``, ``broker_id``, ``leader_epoch``, ``group_id``,
``generation_id``, ...), and ``exc_info`` with the traceback of an error.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Final, TextIO

__all__ = ["LOG_FORMATS", "LOG_LEVELS", "JsonFormatter", "log_level", "setup_logging"]

LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
"""The levels ``--log-level`` takes (any case; log4j's ``WARN`` means WARNING)."""
LOG_FORMATS: Final = ("text", "json")
"""The formats ``--log-format`` takes."""

TEXT_FORMAT: Final = "[%(asctime)s] %(levelname)s %(name)s: %(message)s"

# What every LogRecord has: anything else on a record came from a log call's ``extra``.
_BLANK_RECORD: Final = logging.LogRecord("", 0, "", 0, "", None, None)
_STANDARD: Final = frozenset(_BLANK_RECORD.__dict__) | {"message", "asctime", "taskName"}


def log_level(text: str) -> str:
    """``--log-level``'s argparse ``type``: the level's name in capitals (its ``choices``
    then refuse an unknown one with the list of the known)."""
    name = text.strip().upper()
    return "WARNING" if name == "WARN" else name


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line: ``ts``, ``level``, ``logger``,
    ``message``, the record's ``extra`` fields, and ``exc_info`` when it has one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in line:
                line[key] = value
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc_info"] = record.exc_text
        if record.stack_info:
            line["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def setup_logging(level: str, log_format: str = "text", stream: TextIO | None = None) -> None:
    """Send the process's log to ``stream`` (stderr) at ``level`` in ``log_format``
    (``text`` or ``json``), replacing any handler set up before."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"unknown log format {log_format!r}; choose from {', '.join(LOG_FORMATS)}")
    name = log_level(level)
    if name not in LOG_LEVELS:
        raise ValueError(f"unknown log level {level!r}; choose from {', '.join(LOG_LEVELS)}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    formatter = JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    handler.setFormatter(formatter)
    logging.basicConfig(level=getattr(logging, name), handlers=[handler], force=True)
