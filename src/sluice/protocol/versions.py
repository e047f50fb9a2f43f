"""The API versions a broker accepts and advertises in ApiVersions, as one table.

A :class:`VersionTable` maps each API key to its :class:`ApiVersionRange`. The broker
builds its table from the API modules' declarations (``sluice.server.apis``) and passes
it both to :func:`~sluice.protocol.codec.decode_request` (which rejects versions outside
it) and to the ApiVersions helpers (which advertise it), so the two cannot disagree.

An entry may advertise a lower minimum than it accepts (Produce does, as Kafka 4.x does:
see ``server/apis/produce.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from . import apis
from .apis import ApiKey

__all__ = ["ApiVersionRange", "VersionTable"]


@dataclass(frozen=True, slots=True)
class ApiVersionRange:
    """The request versions accepted for one API, and the minimum advertised for it."""

    api_key: int
    min_version: int
    max_version: int
    advertised_min_version: int | None = None
    """Minimum to put in ApiVersions responses if lower than ``min_version``."""

    def __post_init__(self) -> None:
        if self.min_version > self.max_version:
            raise ValueError(f"API {self.api_key}: min_version > max_version")
        span = apis.kio_version_range(self.api_key)
        if span is None:
            raise ValueError(f"kio does not know API key {self.api_key}")
        if self.min_version < span[0] or self.max_version > span[1]:
            raise ValueError(
                f"API {self.api_key}: versions {self.min_version}-{self.max_version} are "
                f"outside what kio can decode ({span[0]}-{span[1]})"
            )
        if self.advertised_min_version is not None and not (
            0 <= self.advertised_min_version <= self.min_version
        ):
            raise ValueError(f"API {self.api_key}: bad advertised_min_version")

    @property
    def advertised_min(self) -> int:
        """The minimum version to advertise in ApiVersions."""
        if self.advertised_min_version is None:
            return self.min_version
        return self.advertised_min_version

    def accepts(self, api_version: int) -> bool:
        """Whether requests of this version are decoded (rather than rejected)."""
        return self.min_version <= api_version <= self.max_version


class VersionTable(Mapping[int, ApiVersionRange]):
    """An immutable mapping from API key to its :class:`ApiVersionRange`."""

    __slots__ = ("_ranges",)

    def __init__(self, ranges: Iterable[ApiVersionRange]) -> None:
        table: dict[int, ApiVersionRange] = {}
        for entry in ranges:
            if entry.api_key in table:
                raise ValueError(f"API key {entry.api_key} listed twice")
            table[entry.api_key] = entry
        self._ranges = dict(sorted(table.items()))

    def __getitem__(self, api_key: int) -> ApiVersionRange:
        return self._ranges[api_key]

    def __iter__(self) -> Iterator[int]:
        return iter(self._ranges)

    def __len__(self) -> int:
        return len(self._ranges)

    def __repr__(self) -> str:
        spans = ", ".join(
            f"{_name(key)}={entry.min_version}-{entry.max_version}"
            for key, entry in self._ranges.items()
        )
        return f"VersionTable({spans})"

    def accepts(self, api_key: int, api_version: int) -> bool:
        """Whether a request of this API and version is decoded."""
        entry = self._ranges.get(api_key)
        return entry is not None and entry.accepts(api_version)

    def restrict(self, api_keys: Iterable[int]) -> VersionTable:
        """The entries for ``api_keys`` only (e.g. the APIs with a registered handler).

        Keys absent from this table are ignored.
        """
        wanted = set(api_keys)
        return VersionTable(entry for key, entry in self._ranges.items() if key in wanted)

    def without(self, *api_keys: int) -> VersionTable:
        """This table without ``api_keys``."""
        return VersionTable(e for key, e in self._ranges.items() if key not in api_keys)

    def advertised(self) -> list[tuple[int, int, int]]:
        """(api_key, min_version, max_version) triples for ApiVersions, by key."""
        return [(key, e.advertised_min, e.max_version) for key, e in self._ranges.items()]


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)
