"""The report of ``sluice bench compare``: issue 9's goals checked against the medians.

A :class:`Goal` names a row, a metric, the broker measured and either the broker it is
divided by (a ratio, the median of per-run ratios) or nothing (an absolute median), and
the bound of issue 9. :func:`goal_lines` evaluates them, :func:`print_report` prints the
table with the load generator of each row, and :func:`chart` draws each goal's figure
relative to its bound (1.0 = exactly met) as a PNG.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Goal:
    """One line of issue 9: ``broker``'s ``metric`` (over ``base``'s, if any) ``op`` ``bound``."""

    row: str
    metric: str
    broker: str
    base: str | None
    op: str  # ">=" or "<="
    bound: float
    text: str


@dataclass
class Line:
    """A goal with what was measured: the medians, the value compared, and the verdict."""

    row: str
    text: str
    metric: str
    broker: str
    base: str | None
    mine: float | None
    theirs: float | None
    value: float | None
    op: str
    bound: float
    met: bool | None
    generator: str


GOALS = [
    *(
        g
        for p in ("p1", "p8")
        for g in (
            Goal(f"produce-{p}", "MB/s", "sluice", "tansu", ">=", 1.2, "MB/s >= 1.2x Tansu"),
            Goal(f"produce-{p}", "MB/s", "sluice", "null", ">=", 0.9, "MB/s >= 90% of null sink"),
            Goal(
                f"produce-{p}", "broker CPU-s/GB", "sluice", "tansu", "<=", 1.0, "CPU-s/GB <= Tansu"
            ),
        )
    ),
    *(
        g
        for r in ("consume-1k", "consume-100")
        for g in (
            Goal(r, "MB/s", "sluice", "tansu", ">=", 1.2, "MB/s >= 1.2x Tansu"),
            Goal(r, "broker CPU-s/GB", "sluice", "tansu", "<=", 0.5, "CPU/GB <= 0.5x Tansu"),
        )
    ),
    Goal("latency", "p99 ms", "sluice", "tansu", "<=", 1.5, "p99 <= 1.5x Tansu"),
    Goal("e2e", "p50 ms", "sluice", None, "<=", 2.0, "p50 <= 2 ms"),
    Goal("e2e", "p99 ms", "sluice", None, "<=", 5.0, "p99 <= 5 ms"),
    Goal("cluster", "MB/s", "cluster", "single", ">=", 0.5, "RF=3 acks=all >= 50% of acks=1"),
    Goal("cluster", "p99 ms", "cluster", None, "<=", 2.0, "RF=3 acks=all p99 <= 2 ms"),
    Goal("startup", "ready ms", "sluice", None, "<=", 300.0, "ready <= 300 ms"),
    Goal("startup", "idle RSS MB", "sluice", None, "<=", 60.0, "idle RSS <= 60 MB"),
    Goal("stored", "RSS MB", "sluice", None, "<=", 150.0, "RSS after storing <= 150 MB"),
    Goal("group", "join ms", "sluice", None, "<=", 300.0, "join <= 300 ms"),
]
# Figures shown beside a goal for context: the other broker's median of the same metric.
CONTEXT = {"startup": "tansu", "group": "tansu", "e2e": "tansu"}


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"


def median(runs: list[dict[str, float]], metric: str) -> float | None:
    values = [r[metric] for r in runs if metric in r]
    return statistics.median(values) if values else None


def paired_ratio(mine: list[dict[str, float]], theirs: list[dict[str, float]],
                 metric: str) -> float | None:  # fmt: skip
    """Median of per-run ratios (runs paired by repeat); a ratio of medians if counts differ."""
    if len(mine) == len(theirs) and mine:
        ratios = [a[metric] / b[metric] for a, b in zip(mine, theirs, strict=True) if b[metric]]
        return statistics.median(ratios) if ratios else None
    top, bottom = median(mine, metric), median(theirs, metric)
    return top / bottom if top is not None and bottom else None


def goal_lines(rows: list[Any]) -> list[Line]:
    """Evaluate every goal whose row was run."""
    by_key = {row.key: row for row in rows}
    lines: list[Line] = []
    for goal in GOALS:
        row = by_key.get(goal.row)
        if row is None:
            continue
        mine_runs = row.runs.get(goal.broker, [])
        base = goal.base or CONTEXT.get(goal.row)
        theirs_runs = row.runs.get(base, []) if base else []
        mine = median(mine_runs, goal.metric)
        theirs = median(theirs_runs, goal.metric) if base else None
        value = paired_ratio(mine_runs, theirs_runs, goal.metric) if goal.base else mine
        met = None if value is None else (value >= goal.bound if goal.op == ">=" else
                                          value <= goal.bound)  # fmt: skip
        lines.append(Line(goal.row, goal.text, goal.metric, goal.broker, base, mine, theirs,
                          value, goal.op, goal.bound, met, row.generator))  # fmt: skip
    return lines


def machine_line(env: dict[str, Any]) -> str:
    """The CPU and its wake-up round trips (older JSON files have neither)."""
    trips = env.get("wake-up round trip us") or {}
    measured = ", ".join(f"{us:g} us {where}" for where, us in trips.items())
    return f"cpu {env.get('cpu model', 'unknown')}; wake-up round trip {measured or 'not measured'}"


def print_report(env: dict[str, Any], rows: list[Any], lines: list[Line]) -> None:
    print(f"# sluice bench compare  {env['date']}  {env['cpus']} CPUs  python {env['python']}  "
          f"librdkafka {env['librdkafka']}  {env['tansu']}")  # fmt: skip
    print(f"# {machine_line(env)}")
    print(f"# load average before {env['loadavg']}, after {env['loadavg_after']}; "
          f"wall {env['wall_seconds']} s; options {env['options']}")  # fmt: skip
    print("\n== goals of issue 9 (medians; ratios are medians of per-run ratios)")
    head = f"{'row':12} {'goal':32} {'sluice':>10} {'other':>16} {'value':>8} {'met':>4}  generator"
    print(head)
    for ln in lines:
        other = f"{fmt(ln.theirs)} {ln.base}" if ln.base else "-"
        met = "-" if ln.met is None else ("yes" if ln.met else "NO")
        mine = fmt(ln.mine) if ln.broker == "sluice" else f"{fmt(ln.mine)} {ln.broker}"
        print(f"{ln.row:12} {ln.text:32} {mine:>10} {other:>16} {fmt(ln.value):>8} {met:>4}"
              f"  {ln.generator}")  # fmt: skip
    print("\n== every row's medians")
    for row in rows:
        print(f"-- {row.key}: {row.title} [{row.generator}]")
        for name, runs in row.runs.items():
            metrics = list(runs[0]) if runs else []
            shown = "  ".join(f"{m} {fmt(median(runs, m))}" for m in metrics)
            print(f"   {name:8} ({len(runs)} runs) {shown or 'no runs'}")
        for error in row.errors:
            print(f"   ERROR {error[:400]}")
        busy = [i for i in row.idle if "NOT IDLE" in i]
        if busy:
            print(f"   {len(busy)} of {len(row.idle)} runs started on a busy machine: {busy[0]}")


def chart(lines: list[Line], path: str, env: dict[str, Any]) -> None:
    """Each goal's figure over its bound (inverted for <= bounds): right of 1.0 is met."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [ln for ln in lines if ln.value]
    scores = [(ln.value / ln.bound if ln.op == ">=" else ln.bound / ln.value) for ln in shown]
    labels = [f"{ln.row}: {ln.text}" for ln in shown]
    colors = ["tab:green" if ln.met else "tab:red" for ln in shown]
    fig, ax = plt.subplots(figsize=(10, 0.4 * len(shown) + 1.5))
    ax.barh(range(len(shown)), scores, color=colors)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(range(len(shown)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("measured / goal (>= 1 means the goal of issue 9 is met)")
    ax.set_title(f"Sluice vs Tansu, {env['date']}, load {env['loadavg']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
