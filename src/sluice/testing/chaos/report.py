"""The chaos run's report: one row per fault, then the anomalies found, a few of each
kind, with their partitions and offsets. Plain text, no I/O."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from sluice.testing.chaos.checker import KINDS, CheckResult, describe_offsets

__all__ = ["FaultReport", "format_report"]

EXAMPLES = 5
"""Anomalies of each kind shown per fault."""


@dataclass
class FaultReport:
    """One fault's round: how often it was injected, what the checker found, and what
    else happened (``notes``); ``skipped`` or ``error`` when there is no result."""

    fault: str
    injected: int = 0
    result: CheckResult | None = None
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None
    error: str | None = None

    @property
    def verdict(self) -> str:
        if self.skipped is not None:
            return "skipped"
        if self.error is not None or self.result is None:
            return "error"
        return "ok" if self.result.ok else "VIOLATION"

    @property
    def failed(self) -> bool:
        """Whether this round makes the run fail: a violation or an error."""
        return self.verdict in ("VIOLATION", "error")


_HEADERS = ("fault", "injected", "acked", "failed", *KINDS, "verdict")


def _row(report: FaultReport) -> tuple[str, ...]:
    result = report.result
    if result is None:
        counts = ["-"] * (2 + len(KINDS))
    else:
        counts = [str(result.acked), str(result.failed)]
        counts += [str(result.count(kind)) for kind in KINDS]
    return (report.fault, str(report.injected), *counts, report.verdict)


def format_table(reports: list[FaultReport]) -> str:
    rows = [_HEADERS, *(_row(r) for r in reports)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADERS))]
    lines = []
    for n, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])]
        cells += [cell.rjust(w) for cell, w in zip(row[1:-1], widths[1:-1], strict=True)]
        cells.append(row[-1])
        lines.append("  ".join(cells))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _details(report: FaultReport) -> list[str]:
    lines = []
    if report.skipped is not None:
        lines.append(f"  skipped: {report.skipped}")
    if report.error is not None:
        lines.append(f"  error: {report.error}")
    lines += [f"  note: {note}" for note in report.notes]
    if report.result is not None:
        for kind in KINDS:
            found = report.result.of_kind(kind)
            if not found:
                continue
            by_partition: dict[int, list[int]] = defaultdict(list)
            for anomaly in found:
                by_partition[anomaly.partition].extend(anomaly.offsets)
            where = "; ".join(
                f"partition {p}: offsets {describe_offsets(offs) or '-'}"
                for p, offs in sorted(by_partition.items())
            )
            lines.append(f"  {kind}: {len(found)} ({where})")
            lines += [f"    {a.detail}" for a in found[:EXAMPLES]]
            if len(found) > EXAMPLES:
                lines.append(f"    ... and {len(found) - EXAMPLES} more")
    if lines:
        lines.insert(0, f"{report.fault}:")
    return lines


def format_report(reports: list[FaultReport]) -> str:
    """The table, then each fault's notes and anomalies."""
    lines = [format_table(reports)]
    details = [line for r in reports for line in _details(r)]
    if details:
        lines += ["", *details]
    failed = [r.fault for r in reports if r.failed]
    lines.append("")
    lines.append(f"violations or errors in: {', '.join(failed)}" if failed else "no violations")
    return "\n".join(lines)
