"""The API versions the broker accepts and advertises in ApiVersions: one table.

:data:`DEFAULT_VERSIONS` is the single place where Sluice declares, per API, the
request versions it decodes. The broker narrows it to the APIs that have a handler
registered (:meth:`VersionTable.restrict`) and passes the result both to
:func:`~sluice.protocol.codec.decode_request` (which rejects versions outside it) and
to the ApiVersions helpers (which advertise it), so the two cannot disagree.

An entry may advertise a lower minimum than it accepts. Produce does, as Kafka 4.x
does (KAFKA-18659, ``ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION = 0``):
librdkafka before 2.11.1 checks that Produce v0 is in the broker's range before it
compresses with gzip, snappy or lz4, and silently sends uncompressed batches
otherwise. Produce v0-2 requests are still rejected (and kio cannot parse them).

See ``docs/protocol.md`` for why each maximum was chosen.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Final

from . import apis
from .apis import ApiKey

__all__ = ["DEFAULT_VERSIONS", "ApiVersionRange", "VersionTable"]


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

    def with_range(
        self,
        api_key: int,
        min_version: int | None = None,
        max_version: int | None = None,
    ) -> VersionTable:
        """This table with one API's range added or changed (other fields kept)."""
        current = self._ranges.get(api_key)
        if current is None:
            if min_version is None or max_version is None:
                raise ValueError("a new entry needs both min_version and max_version")
            entry = ApiVersionRange(api_key, min_version, max_version)
        else:
            entry = replace(
                current,
                min_version=current.min_version if min_version is None else min_version,
                max_version=current.max_version if max_version is None else max_version,
            )
        return VersionTable([*(e for k, e in self._ranges.items() if k != api_key), entry])

    def advertised(self) -> list[tuple[int, int, int]]:
        """(api_key, min_version, max_version) triples for ApiVersions, by key."""
        return [(key, e.advertised_min, e.max_version) for key, e in self._ranges.items()]


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


_R = ApiVersionRange

DEFAULT_VERSIONS: Final = VersionTable(
    [
        # Produce v12 is v11 plus transactions v2 (KIP-890 part 2); v13 uses topic ids.
        _R(ApiKey.PRODUCE, 3, 11, advertised_min_version=0),
        # Fetch v13+ identifies topics by id (KIP-516); librdkafka then needs ids
        # in Metadata, else it falls back to v12.
        _R(ApiKey.FETCH, 4, 12),
        # ListOffsets v8-v11 add tiered-storage timestamps (-4, -5, -6) and async reads.
        _R(ApiKey.LIST_OFFSETS, 1, 7),
        _R(ApiKey.METADATA, 0, 12),
        # OffsetCommit/OffsetFetch v9 belong to the KIP-848 consumer protocol.
        _R(ApiKey.OFFSET_COMMIT, 2, 8),
        _R(ApiKey.OFFSET_FETCH, 1, 8),
        # FindCoordinator v5 adds TRANSACTION_ABORTABLE, v6 share groups.
        _R(ApiKey.FIND_COORDINATOR, 0, 4),
        _R(ApiKey.JOIN_GROUP, 0, 9),
        _R(ApiKey.HEARTBEAT, 0, 4),
        _R(ApiKey.LEAVE_GROUP, 0, 5),
        _R(ApiKey.SYNC_GROUP, 0, 5),
        _R(ApiKey.DESCRIBE_GROUPS, 0, 5),
        _R(ApiKey.LIST_GROUPS, 0, 5),
        _R(ApiKey.API_VERSIONS, 0, 4),
        _R(ApiKey.CREATE_TOPICS, 2, 7),
        _R(ApiKey.DELETE_TOPICS, 1, 6),
        _R(ApiKey.DELETE_RECORDS, 0, 2),
        # InitProducerId v6 is two-phase commit (KIP-939).
        _R(ApiKey.INIT_PRODUCER_ID, 0, 5),
        _R(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4),
        _R(ApiKey.ELECT_LEADERS, 0, 2),
        # AlterPartitionReassignments v1 adds AllowReplicationFactorChange.
        _R(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1),
        _R(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0),
        # Transactions v1 only: v4+ of these bring TRANSACTION_ABORTABLE / KIP-890.
        _R(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 3),
        _R(ApiKey.ADD_OFFSETS_TO_TXN, 0, 3),
        _R(ApiKey.END_TXN, 0, 3),
        _R(ApiKey.TXN_OFFSET_COMMIT, 0, 3),
        _R(ApiKey.WRITE_TXN_MARKERS, 1, 1),
        # ListTransactions v1 adds the duration filter (KIP-994).
        _R(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0),
        _R(ApiKey.LIST_TRANSACTIONS, 0, 1),
        _R(ApiKey.DESCRIBE_CONFIGS, 1, 4),
        _R(ApiKey.ALTER_CONFIGS, 0, 2),
        _R(ApiKey.CREATE_PARTITIONS, 0, 3),
        _R(ApiKey.DELETE_GROUPS, 0, 2),
        _R(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1),
        _R(ApiKey.OFFSET_DELETE, 0, 0),
        # DescribeCluster v2 adds IncludeFencedBrokers (KIP-1073).
        _R(ApiKey.DESCRIBE_CLUSTER, 0, 1),
    ]
)
"""Every API Sluice serves (each has a handler), with the versions it accepts; the broker
restricts it to the handlers it has registered."""
