"""The plan of ``sluice consumer-groups --reset-offsets``: which offset each partition
gets, from the group's committed offsets and the partitions' log start and end offsets.
No I/O here; :mod:`sluice.cli.consumer_groups` fetches the inputs and commits the plan.

The modes and their edge cases follow kafka-consumer-groups: an offset outside the log
is moved to its nearest end (with a warning), a time with no record after it gives the
log end offset, and ``--to-current`` gives the log end offset where nothing is committed.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "MODES",
    "ResetError",
    "ResetSpec",
    "parse_datetime",
    "parse_duration",
    "parse_topic_scope",
    "plan",
]

_Key = tuple[str, int]  # (topic, partition)

# flag -> whether it takes a value
MODES: dict[str, bool] = {
    "to-earliest": False,
    "to-latest": False,
    "to-current": False,
    "to-offset": True,
    "shift-by": True,
    "to-datetime": True,
    "by-duration": True,
}


class ResetError(ValueError):
    """The reset cannot be planned (bad value, or nothing to shift from)."""


@dataclasses.dataclass(frozen=True)
class ResetSpec:
    """One reset mode; ``value`` is the offset, the shift or the timestamp (ms)."""

    mode: str
    value: int | None = None


_DATETIME = re.compile(
    r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(\.\d{1,3})?(Z|[+-]\d{2}:?\d{2})?$"
)


def parse_datetime(text: str, local: datetime.tzinfo | None = None) -> int:
    """Kafka's ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone (``Z``, ``+hh:mm`` or
    ``+hhmm``) as epoch milliseconds; without a zone the time is local (``local``, by
    default the machine's zone)."""
    match = _DATETIME.match(text.strip())
    if match is None:
        raise ResetError(
            f"Error parsing timestamp '{text}': expected YYYY-MM-DDTHH:mm:SS.sss, "
            "optionally followed by a zone such as Z or +01:00"
        )
    date, clock, fraction, zone = match.groups()
    millis = int((fraction or ".0")[1:].ljust(3, "0"))
    try:
        when = datetime.datetime.fromisoformat(f"{date}T{clock}")
    except ValueError as exc:
        raise ResetError(f"Error parsing timestamp '{text}': {exc}") from None
    if zone is None:
        when = when.replace(tzinfo=local) if local is not None else when.astimezone()
    elif zone == "Z":
        when = when.replace(tzinfo=datetime.UTC)
    else:
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = datetime.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        when = when.replace(tzinfo=datetime.timezone(sign * offset))
    return int(when.timestamp()) * 1000 + millis


_DURATION = re.compile(
    r"^P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d{1,3})?)S)?)?$"
)


def parse_duration(text: str) -> int:
    """An ISO-8601 duration as Kafka's --by-duration takes it (``PnDTnHnMn.nS``, e.g.
    ``PT0H5M0S``) in milliseconds."""
    match = _DURATION.match(text.strip().upper())
    if match is None or text.strip().upper() in ("P", "PT") or text.strip().endswith("T"):
        raise ResetError(f"Error parsing duration '{text}': expected e.g. P1DT2H3M4.5S")
    parts = match.groupdict()
    seconds = float(parts["seconds"] or 0)
    return (
        int(parts["days"] or 0) * 86_400_000
        + int(parts["hours"] or 0) * 3_600_000
        + int(parts["minutes"] or 0) * 60_000
        + round(seconds * 1000)
    )


def parse_topic_scope(text: str) -> tuple[str, list[int] | None]:
    """``topic`` (every partition) or ``topic:0,1,2``."""
    topic, sep, rest = text.partition(":")
    if not topic:
        raise ResetError(f"Invalid --topic '{text}': the topic name is empty")
    if not sep:
        return topic, None
    try:
        partitions = [int(p) for p in rest.split(",")]
    except ValueError:
        raise ResetError(f"Invalid --topic '{text}': expected topic:0,1,2") from None
    if any(p < 0 for p in partitions):
        raise ResetError(f"Invalid --topic '{text}': partitions are not negative")
    return topic, sorted(set(partitions))


def plan(
    spec: ResetSpec,
    partitions: Sequence[_Key],
    committed: Mapping[_Key, int],
    earliest: Mapping[_Key, int],
    latest: Mapping[_Key, int],
    by_time: Mapping[_Key, int | None] | None = None,
    warn: Callable[[str], None] = lambda _message: None,
) -> dict[_Key, int]:
    """The new offset of each of ``partitions``. ``by_time`` holds, for --to-datetime
    and --by-duration, the first offset at or after the time (None: none)."""
    out: dict[_Key, int] = {}
    for tp in partitions:
        low, high = earliest[tp], latest[tp]
        if spec.mode == "to-earliest":
            out[tp] = low
        elif spec.mode == "to-latest":
            out[tp] = high
        elif spec.mode == "to-current":
            out[tp] = committed.get(tp, high)
        elif spec.mode in ("to-datetime", "by-duration"):
            found = (by_time or {}).get(tp)
            out[tp] = high if found is None else found
        elif spec.mode in ("to-offset", "shift-by"):
            assert spec.value is not None
            if spec.mode == "to-offset":
                wanted = spec.value
            elif tp in committed:
                wanted = committed[tp] + spec.value
            else:
                raise ResetError(
                    f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is "
                    "no current committed offset"
                )
            out[tp] = _in_range(tp, wanted, low, high, warn)
        else:
            raise ResetError(f"unknown reset mode --{spec.mode}")
    return out


def _in_range(tp: _Key, offset: int, low: int, high: int, warn: Callable[[str], None]) -> int:
    name = f"{tp[0]}-{tp[1]}"
    if offset > high:
        warn(
            f"New offset ({offset}) is higher than latest offset for topic partition "
            f"{name}. Value will be set to {high}"
        )
        return high
    if offset < low:
        warn(
            f"New offset ({offset}) is lower than earliest offset for topic partition "
            f"{name}. Value will be set to {low}"
        )
        return low
    return offset
