"""A synthetic online shop's clickstream, and the demo's aggregates computed in plain Python.

Shoppers open sessions, view product pages, add to cart and sometimes buy. Event
time runs over a fixed span of minutes whatever the event count; some events are
delivered late and out of order (never later than the watermark allows, so every
event counts). The stream ends with one ``end_of_stream`` marker whose event time
lies past the last window plus the watermark delay: it closes every window, and
the pipeline leaves it out of the aggregates.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = [
    "PRODUCTS",
    "Event",
    "WindowAggregate",
    "generate_events",
    "reference_aggregates",
]

# product id -> (name, price in cents)
PRODUCTS: dict[str, tuple[str, int]] = {
    "p01": ("espresso beans 1kg", 2490), "p02": ("pour-over kettle", 5900),
    "p03": ("ceramic dripper", 2200), "p04": ("hand grinder", 8900),
    "p05": ("paper filters x100", 650), "p06": ("milk jug", 1800),
    "p07": ("digital scale", 3400), "p08": ("travel mug", 2100),
    "p09": ("decaf beans 500g", 1390), "p10": ("espresso machine", 34900),
    "p11": ("tamper", 2900), "p12": ("cold brew bottle", 2600),
}  # fmt: skip
_PAGES = ("home", "search", "category", "cart", "checkout")


@dataclass(frozen=True)
class Event:
    """One click: ``type`` is view, add_to_cart, purchase, page or end_of_stream."""

    event_id: int
    user_id: str
    session_id: str
    type: str
    page: str
    product_id: str | None
    price_cents: int
    event_time_ms: int

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "event_id": self.event_id, "user_id": self.user_id,
                "session_id": self.session_id, "type": self.type, "page": self.page,
                "product_id": self.product_id, "price_cents": self.price_cents,
                "event_time_ms": self.event_time_ms,
            },
            separators=(",", ":"),
        ).encode()  # fmt: skip


def _session_events(rng: random.Random) -> Iterator[tuple[str, str, str | None]]:
    """(type, page, product) steps of one visit."""
    yield "page", rng.choice(("home", "search", "category")), None
    favourites = rng.sample(sorted(PRODUCTS), 3)
    for _ in range(rng.randint(1, 6)):
        product = rng.choice(favourites) if rng.random() < 0.7 else rng.choice(sorted(PRODUCTS))
        yield "view", f"product/{product}", product
        if rng.random() < 0.25:
            yield "add_to_cart", f"product/{product}", product
            if rng.random() < 0.45:
                yield "page", "checkout", None
                yield "purchase", "checkout", product
        elif rng.random() < 0.2:
            yield "page", rng.choice(_PAGES), None


def generate_events(
    count: int, minutes: int, start_ms: int, seed: int = 7, late_fraction: float = 0.05,
    max_lateness_ms: int = 45_000,
) -> list[Event]:  # fmt: skip
    """``count`` shop events over ``minutes`` minutes of event time from ``start_ms``,
    in delivery order (a ``late_fraction`` arrives up to ``max_lateness_ms`` late),
    followed by the end-of-stream marker."""
    if count < 1 or minutes < 1:
        raise ValueError("the demo needs at least one event and one minute")
    rng = random.Random(seed)
    span = minutes * 60_000
    steps: list[tuple[str, str, str, str, str | None]] = []
    users = [f"u{n:04d}" for n in range(max(count // 25, 10))]
    n_session = 0
    while len(steps) < count:
        user = rng.choice(users)
        n_session += 1
        session = f"s{n_session:06d}"
        visit = _session_events(rng)
        steps.extend((user, session, kind, page, product) for kind, page, product in visit)
    steps = steps[:count]
    events = []
    for i, (user, session, kind, page, product) in enumerate(steps):
        # sessions are in time order; jitter makes neighbours overlap a little
        at = start_ms + (i * span) // count + rng.randint(0, 400)
        price = PRODUCTS[product][1] if product is not None else 0
        events.append(
            Event(i, user, session, kind, page, product, price, min(at, start_ms + span - 1))
        )
    # delivery order: a few events are held back and delivered later than their time
    keyed = []
    for e in events:
        delay = rng.randint(5_000, max_lateness_ms) if rng.random() < late_fraction else 0
        keyed.append((e.event_time_ms + delay, e.event_id, e))
    delivered = [e for _, _, e in sorted(keyed)]
    marker = Event(count, "-", "-", "end_of_stream", "-", None, 0, start_ms + span + 3_600_000)
    return [*delivered, marker]


@dataclass(frozen=True)
class WindowAggregate:
    """Views, purchases and revenue of one product in one event-time window."""

    window_start_ms: int
    product_id: str
    views: int
    purchases: int
    revenue_cents: int

    @property
    def conversion(self) -> float:
        return self.purchases / self.views if self.views else 0.0


def reference_aggregates(events: Iterable[Event], window_ms: int) -> list[WindowAggregate]:
    """What the Spark job computes, in plain Python: per product per window."""
    acc: dict[tuple[int, str], list[int]] = {}
    for e in events:
        if e.product_id is None or e.type not in ("view", "add_to_cart", "purchase"):
            continue
        start = e.event_time_ms - e.event_time_ms % window_ms
        row = acc.setdefault((start, e.product_id), [0, 0, 0])
        if e.type == "view":
            row[0] += 1
        elif e.type == "purchase":
            row[1] += 1
            row[2] += e.price_cents
    return [WindowAggregate(s, p, *acc[(s, p)]) for s, p in sorted(acc)]
