"""The demo's readable summary and its chart (PNG, drawn with matplotlib)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .events import PRODUCTS

__all__ = ["Metric", "by_key", "chart_figure", "render_chart", "summary_lines"]

# (window_start, product_id) -> (views, purchases, revenue_cents)
Metric = tuple[int, int, int]


def by_key(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], Metric]:
    """Result rows keyed by window and product (a window written twice is an error)."""
    out: dict[tuple[str, str], Metric] = {}
    for row in rows:
        key = (str(row["window_start"]), str(row["product_id"]))
        if key in out:
            raise ValueError(f"window {key} appears twice in the results")
        out[key] = (int(row["views"]), int(row["purchases"]), int(row["revenue_cents"]))
    return out


def _money(cents: int) -> str:
    return f"${cents / 100:,.2f}"


def summary_lines(metrics: Mapping[tuple[str, str], Metric]) -> list[str]:
    """Per-window totals, the best-selling products and the overall figures."""
    windows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    products: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for (window, product), values in metrics.items():
        for i, v in enumerate(values):
            windows[window][i] += v
            products[product][i] += v
    lines = [f"{'window (UTC)':<22}{'views':>8}{'purchases':>11}{'revenue':>13}{'conversion':>12}"]
    for window in sorted(windows):
        v, p, r = windows[window]
        conv = f"{p / v:.1%}" if v else "-"
        lines.append(f"{window:<22}{v:>8}{p:>11}{_money(r):>13}{conv:>12}")
    lines.append("")
    lines.append("top products by revenue:")
    ranked = sorted(products.items(), key=lambda kv: (-kv[1][2], kv[0]))
    for product, (v, p, r) in ranked[:5]:
        name = PRODUCTS.get(product, (product, 0))[0]
        conv = f"{p / v:.1%}" if v else "-"
        lines.append(f"  {product} {name:<20} {p:>4} sold  {_money(r):>12}  conversion {conv}")
    tv, tp, tr = (sum(w[i] for w in windows.values()) for i in range(3))
    lines.append("")
    lines.append(
        f"total: {tv} product views, {tp} purchases, {_money(tr)} revenue, conversion {tp / tv:.1%}"
        if tv
        else "total: no product views"
    )
    return lines


def render_chart(
    metrics: Mapping[tuple[str, str], Metric], path: Path, title: str,
    log: Callable[[str], None] = print,
) -> Path:  # fmt: skip
    """:func:`chart_figure`, written as a PNG to ``path``."""
    import matplotlib.pyplot as plt

    fig = chart_figure(metrics, title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")  # the legend outside the axes included
    plt.close(fig)
    log(f"chart: {path}")
    return path


def chart_figure(metrics: Mapping[tuple[str, str], Metric], title: str) -> Any:
    """Revenue per window (stacked, top five products and the rest) above the
    conversion rate per window, as a matplotlib figure (two axes). The legend sits to
    the right of the bars, never over them, and the conversion axis starts at 0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    windows = sorted({w for w, _ in metrics})
    totals: dict[str, int] = defaultdict(int)
    for (_, product), (_, _, revenue) in metrics.items():
        totals[product] += revenue
    top = [p for p, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:5]]
    labels = [w[11:16] for w in windows]
    fig, (ax_rev, ax_conv) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    bottom = [0.0] * len(windows)
    for product in [*top, "other"]:
        heights = []
        for w in windows:
            if product == "other":
                cents = sum(m[2] for (ww, p), m in metrics.items() if ww == w and p not in top)
            else:
                cents = metrics.get((w, product), (0, 0, 0))[2]
            heights.append(cents / 100)
        name = PRODUCTS[product][0] if product in PRODUCTS else product
        ax_rev.bar(labels, heights, bottom=bottom, label=name)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax_rev.set_ylabel("revenue ($)")
    ax_rev.set_title(title)
    # outside the plot, to its right: inside, it would hide the tallest bars
    ax_rev.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    conversion = []
    for w in windows:
        views = sum(m[0] for (ww, _), m in metrics.items() if ww == w)
        bought = sum(m[1] for (ww, _), m in metrics.items() if ww == w)
        conversion.append(100 * bought / views if views else 0.0)
    ax_conv.plot(labels, conversion, marker="o")
    ax_conv.set_ylim(0, max(conversion, default=0.0) * 1.15 or 1.0)  # from 0, not the lowest
    ax_conv.set_ylabel("conversion (%)")
    ax_conv.set_xlabel("event-time window start (UTC)")
    ax_conv.tick_params(axis="x", rotation=45)
    fig.tight_layout()
    return fig
