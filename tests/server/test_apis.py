"""The APIs the broker serves: what it advertises in ApiVersions stays byte for byte what
it was (a change to a served version range is a deliberate edit of this file)."""

from __future__ import annotations

import hashlib

import pytest

from sluice.protocol import (
    DEFAULT_VERSIONS,
    VersionTable,
    api_versions_fallback_response,
    api_versions_response,
    encode_response,
)
from sluice.server.apis import HANDLER_MODULES

# (api key, min accepted, max, min advertised) of every API a broker serves.
SERVED = [
    (0, 3, 11, 0), (1, 4, 12, 4), (2, 1, 7, 1), (3, 0, 12, 0), (8, 2, 8, 2), (9, 1, 8, 1),
    (10, 0, 4, 0), (11, 0, 9, 0), (12, 0, 4, 0), (13, 0, 5, 0), (14, 0, 5, 0), (15, 0, 5, 0),
    (16, 0, 5, 0), (18, 0, 4, 0), (19, 2, 7, 2), (20, 1, 6, 1), (21, 0, 2, 0), (22, 0, 5, 0),
    (23, 2, 4, 2), (24, 0, 3, 0), (25, 0, 3, 0), (26, 0, 3, 0), (27, 1, 1, 1), (28, 0, 3, 0),
    (32, 1, 4, 1), (33, 0, 2, 0), (37, 0, 3, 0), (42, 0, 2, 0), (43, 0, 2, 0), (44, 0, 1, 0),
    (45, 0, 1, 0), (46, 0, 0, 0), (47, 0, 0, 0), (60, 0, 1, 0), (65, 0, 0, 0), (66, 0, 1, 0),
]  # fmt: skip

# SHA-256 of the framed ApiVersions response (correlation id 7) of each version, and of
# the v0 fallback sent for a version the broker does not know.
ANSWERS = {
    0: "4948ec4d95bdcbf621ef7bb3c9ce7b11f55a1daac47113042642c4f6d8cad3df",
    1: "375ac2d0b08740a871952dcf5eeb145915ce7b3c30abfda997efac432be083aa",
    2: "375ac2d0b08740a871952dcf5eeb145915ce7b3c30abfda997efac432be083aa",
    3: "cc102e2b4ea2fbd4d91cfeb4e6790be711e58007934a5569b00595f0beedaaa6",
    4: "cc102e2b4ea2fbd4d91cfeb4e6790be711e58007934a5569b00595f0beedaaa6",
}
FALLBACK = "b90e9237d317a1d565feb9a35fc5b9f24eae143b4fff631c3b8df903b7e2ae21"


def served_versions() -> VersionTable:
    """The version table a broker accepts and advertises."""
    return DEFAULT_VERSIONS.restrict(HANDLER_MODULES)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_served_versions_are_unchanged() -> None:
    table = served_versions()
    entries = [(k, e.min_version, e.max_version, e.advertised_min) for k, e in table.items()]
    assert entries == SERVED


@pytest.mark.parametrize("version", sorted(ANSWERS))
def test_api_versions_answers_are_byte_identical(version: int) -> None:
    answer = encode_response(7, api_versions_response(served_versions(), version))
    assert _digest(answer) == ANSWERS[version]


def test_the_fallback_answer_is_byte_identical() -> None:
    answer = encode_response(7, api_versions_fallback_response(served_versions()))
    assert _digest(answer) == FALLBACK
