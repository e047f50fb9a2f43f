"""``sluice chaos``'s machinery: a Jepsen-style fault-injection check of a Sluice cluster.

- :mod:`~sluice.testing.chaos.history`: what the clients did (writes and how they ended,
  records read), recorded from their threads;
- :mod:`~sluice.testing.chaos.checker`: plain functions judging a history (lost,
  duplicated, reordered, vanished, changed, bad reads);
- :mod:`~sluice.testing.chaos.proxy`: the fault-injecting TCP proxy between brokers and
  between each broker and ZooKeeper;
- :mod:`~sluice.testing.chaos.cluster`: a ZooKeeper-mode cluster of broker processes
  wired through the proxy;
- :mod:`~sluice.testing.chaos.faults`: the faults, each injected and healed;
- :mod:`~sluice.testing.chaos.clients`: the confluent-kafka producers and consumers;
- :mod:`~sluice.testing.chaos.run` and :mod:`~sluice.testing.chaos.report`: the rounds
  and the table. See ``docs/chaos.md``.
"""

from __future__ import annotations

from sluice.testing.chaos.checker import Anomaly, CheckResult, check
from sluice.testing.chaos.history import History, Write, decode_value, encode_value
from sluice.testing.chaos.report import FaultReport, format_report
from sluice.testing.chaos.run import ChaosConfig, run_chaos

__all__ = [
    "Anomaly",
    "ChaosConfig",
    "CheckResult",
    "FaultReport",
    "History",
    "Write",
    "check",
    "decode_value",
    "encode_value",
    "format_report",
    "run_chaos",
]
