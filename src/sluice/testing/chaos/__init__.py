"""A Jepsen-style check of a Sluice cluster under faults.

- :mod:`~sluice.testing.chaos.history`: what the clients did (writes and how they ended,
  records read), recorded from their threads;
- :mod:`~sluice.testing.chaos.checker`: plain functions judging a history (lost,
  duplicated, reordered, vanished, changed, bad reads);
- :mod:`~sluice.testing.chaos.report`: the table per fault.
"""

from __future__ import annotations

from sluice.testing.chaos.checker import Anomaly, CheckResult, check
from sluice.testing.chaos.history import History, Write, decode_value, encode_value
from sluice.testing.chaos.report import FaultReport, format_report

__all__ = [
    "Anomaly",
    "CheckResult",
    "FaultReport",
    "History",
    "Write",
    "check",
    "decode_value",
    "encode_value",
    "format_report",
]
