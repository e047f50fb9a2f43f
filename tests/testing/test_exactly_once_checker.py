"""The exactly-once checker of the Spark cluster test (tests/support/exactly_once.py)."""

from __future__ import annotations

import pytest

from support.exactly_once import check_exactly_once

INPUT = [(0, b"a"), (1, b"b"), (0, b"c"), (1, b"d")]


def test_a_faithful_copy_passes() -> None:
    result = check_exactly_once(INPUT, [(1, b"b"), (0, b"a"), (0, b"c"), (1, b"d")])
    assert result.ok and result.in_order
    assert "4 in, 4 out: 0 missing, 0 duplicated" in result.summary()


def test_missing_duplicated_unexpected_misplaced_and_order_are_found() -> None:
    result = check_exactly_once(INPUT, [(0, b"c"), (0, b"a"), (0, b"a"), (0, b"zz"), (0, b"b")])
    assert not result.ok
    assert result.missing == (b"d",)
    assert result.duplicated == {b"a": 2}
    assert result.unexpected == (b"zz",)
    assert result.misplaced == (b"b",)
    assert not result.in_order


def test_input_values_must_be_unique() -> None:
    with pytest.raises(ValueError):
        check_exactly_once([(0, b"a"), (1, b"a")], [])
