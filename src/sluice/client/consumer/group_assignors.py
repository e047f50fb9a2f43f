"""Consumer group protocol encoding (Kafka's ``ConsumerProtocol``) and assignors.

Subscription and Assignment use the classic non-flexible encoding every Kafka
client speaks, so a Sluice consumer can share a group with Java, librdkafka
(confluent-kafka) or kafka-python consumers: the group leader, whoever it is,
decodes everyone's subscription and encodes everyone's assignment.

Assignors: ``range`` (per topic, consecutive partition ranges to members sorted by
member id, the first ones getting one extra) and ``roundrobin`` (all partitions,
sorted, dealt to the members sorted by id, skipping members not subscribed to the
topic), both exactly as Kafka computes them; ``cooperative-sticky`` (Kafka's
CooperativeStickyAssignor, KIP-429): balanced within one partition per member when
the subscriptions agree, every member keeping the partitions it owns (the
``owned_partitions`` of its ConsumerProtocolSubscription v1+) as far as balance
allows; a partition that moves from one live member to another is left out of this
round's assignment, so its owner revokes it and rejoins, and the follow-up
rebalance hands it to its new member (the cooperative two-phase rebalance).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "ASSIGNORS",
    "Assignment",
    "Subscription",
    "cooperative_sticky_assign",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "range_assign",
    "roundrobin_assign",
    "sticky_assign",
]

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")


@dataclass
class Subscription:
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class Assignment:
    partitions: list[tuple[str, int]]
    user_data: bytes | None = None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def i16(self) -> int:
        (v,) = _I16.unpack_from(self.data, self.pos)
        self.pos += 2
        return int(v)

    def i32(self) -> int:
        (v,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(v)

    def string(self) -> str:
        n = self.i16()
        v = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return v

    def bytes_(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        v = self.data[self.pos : self.pos + n]
        self.pos += n
        return v

    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def _string(s: str) -> bytes:
    raw = s.encode()
    return _I16.pack(len(raw)) + raw


def _bytes(b: bytes | None) -> bytes:
    return _I32.pack(-1) if b is None else _I32.pack(len(b)) + b


def _partitions(parts: list[tuple[str, int]]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in parts:
        by_topic.setdefault(topic, []).append(partition)
    out = [_I32.pack(len(by_topic))]
    for topic, ps in by_topic.items():
        out.append(_string(topic))
        out.append(_I32.pack(len(ps)))
        out.extend(_I32.pack(p) for p in sorted(ps))
    return b"".join(out)


def _read_partitions(r: _Reader) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for _ in range(r.i32()):
        topic = r.string()
        out.extend((topic, r.i32()) for _ in range(r.i32()))
    return out


def encode_subscription(sub: Subscription, version: int = 1) -> bytes:
    parts = [_I16.pack(version), _I32.pack(len(sub.topics))]
    parts.extend(_string(t) for t in sub.topics)
    parts.append(_bytes(sub.user_data))
    if version >= 1:
        parts.append(_partitions(sub.owned_partitions))
    return b"".join(parts)


def decode_subscription(data: bytes) -> Subscription:
    r = _Reader(bytes(data))
    version = r.i16()
    topics = [r.string() for _ in range(r.i32())]
    user_data = r.bytes_()
    owned: list[tuple[str, int]] = []
    if version >= 1 and not r.at_end():
        owned = _read_partitions(r)
    return Subscription(topics, user_data, owned)


def encode_assignment(assignment: Assignment, version: int = 1) -> bytes:
    return _I16.pack(version) + _partitions(assignment.partitions) + _bytes(assignment.user_data)


def decode_assignment(data: bytes) -> Assignment:
    if not data:
        return Assignment([])
    r = _Reader(bytes(data))
    r.i16()
    partitions = _read_partitions(r)
    user_data = r.bytes_() if not r.at_end() else None
    return Assignment(partitions, user_data)


Assignor = Callable[[dict[str, int], dict[str, Subscription]], dict[str, list[tuple[str, int]]]]


def range_assign(
    partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
) -> dict[str, list[tuple[str, int]]]:
    """Kafka's RangeAssignor."""
    out: dict[str, list[tuple[str, int]]] = {m: [] for m in subscriptions}
    for topic in sorted(partitions_per_topic):
        members = sorted(m for m, s in subscriptions.items() if topic in s.topics)
        if not members:
            continue
        count = partitions_per_topic[topic]
        per, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            n = per + (1 if i < extra else 0)
            out[member].extend((topic, p) for p in range(start, start + n))
            start += n
    return out


def roundrobin_assign(
    partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
) -> dict[str, list[tuple[str, int]]]:
    """Kafka's RoundRobinAssignor."""
    out: dict[str, list[tuple[str, int]]] = {m: [] for m in subscriptions}
    members = sorted(subscriptions)
    if not members:
        return out
    i = 0
    for topic in sorted(partitions_per_topic):
        for p in range(partitions_per_topic[topic]):
            for _ in range(len(members)):
                member = members[i % len(members)]
                i += 1
                if topic in subscriptions[member].topics:
                    out[member].append((topic, p))
                    break
    return out


def sticky_assign(
    partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
) -> dict[str, list[tuple[str, int]]]:
    """The sticky target assignment: owned partitions kept up to the balanced quota,
    the rest dealt to the least loaded eligible member, then single partitions moved
    from the most to the least loaded member while that narrows a gap of two or more.

    When every member subscribes to the same topics, a member owning no more than
    ``floor(partitions / members)`` of them keeps all of them. A partition claimed by
    two members goes to the first by member id.
    """
    members = sorted(subscriptions)
    out: dict[str, list[tuple[str, int]]] = {m: [] for m in members}
    if not members:
        return out
    eligible: dict[tuple[str, int], list[str]] = {}
    for topic in sorted(partitions_per_topic):
        subscribed = [m for m in members if topic in subscriptions[m].topics]
        if subscribed:
            for p in range(partitions_per_topic[topic]):
                eligible[(topic, p)] = subscribed
    if not eligible:
        return out
    quota = -(-len(eligible) // len(members))  # ceil: nobody keeps more than that
    owners: dict[tuple[str, int], str] = {}
    for m in members:
        for tp in sorted(set(subscriptions[m].owned_partitions)):
            if tp in eligible and tp not in owners and len(out[m]) < quota and m in eligible[tp]:
                owners[tp] = m
                out[m].append(tp)
    for tp in eligible:
        if tp not in owners:
            m = min(eligible[tp], key=lambda c: (len(out[c]), c))
            owners[tp] = m
            out[m].append(tp)
    owned = {m: set(subscriptions[m].owned_partitions) for m in members}
    while True:  # each move lowers the sum of squared loads: this terminates
        moved = False
        for donor in sorted(members, key=lambda c: (-len(out[c]), c)):
            # partitions the donor did not own before move first
            candidates = sorted(out[donor], key=lambda tp: tp in owned[donor])
            for tp in candidates:
                taker = min(eligible[tp], key=lambda c: (len(out[c]), c))
                if len(out[donor]) - len(out[taker]) >= 2:
                    out[donor].remove(tp)
                    out[taker].append(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    for m in members:
        out[m].sort()
    return out


def cooperative_sticky_assign(
    partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
) -> dict[str, list[tuple[str, int]]]:
    """Kafka's CooperativeStickyAssignor: :func:`sticky_assign`, minus the partitions
    still owned by another member of the group (they are revoked first, then assigned
    in the follow-up rebalance)."""
    target = sticky_assign(partitions_per_topic, subscriptions)
    owner: dict[tuple[str, int], str] = {}
    for m in sorted(subscriptions):
        for tp in subscriptions[m].owned_partitions:
            owner.setdefault(tp, m)
    return {
        m: [tp for tp in parts if owner.get(tp, m) == m or tp in subscriptions[m].owned_partitions]
        for m, parts in target.items()
    }


ASSIGNORS: Final[dict[str, Assignor]] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    "cooperative-sticky": cooperative_sticky_assign,
}
COOPERATIVE: Final = frozenset({"cooperative-sticky"})
ALIASES: Final = {"cooperativesticky": "cooperative-sticky"}
