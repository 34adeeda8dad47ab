"""The records' one codec: fields in order, nested records and containers by type, an added
field left out at its default (with its group), a field not stored, a renamed key read through
LEGACY, and the forgiving reads the hand-written readers had."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from pytest_sme2.results.codec import (NOT_STORED, added, decode, decode_optional, encode)


@dataclass(frozen=True)
class Leaf:
    name: str
    n: int = 0
    cached: int = field(default=0, metadata=NOT_STORED)

    to_json = encode
    from_json = classmethod(decode)


@dataclass
class Tree:
    LEGACY: ClassVar[dict[str, str]] = {"old_title": "title"}

    title: str
    leaves: list[Leaf] = field(default_factory=list)
    by_name: dict[str, Leaf] = field(default_factory=dict)
    best: Leaf | None = None
    pairs: list[tuple[str, float]] = field(default_factory=list)
    shape: tuple[int, ...] = ()
    note: str | None = field(default=None, metadata=added())
    low: float | None = field(default=None, metadata=added("range"))
    high: float | None = field(default=None, metadata=added("range"))


def test_fields_in_order_nested_records_by_their_writer_and_containers_as_json():
    t = Tree("t", [Leaf("a", 1, cached=9)], {"b": Leaf("b")}, Leaf("c"), [("x", 1.5)], (2, 3))
    assert encode(t) == {"title": "t", "leaves": [{"name": "a", "n": 1}],
                         "by_name": {"b": {"name": "b", "n": 0}}, "best": {"name": "c", "n": 0},
                         "pairs": [["x", 1.5]], "shape": [2, 3]}
    back = decode(Tree, encode(t))
    assert back == Tree("t", [Leaf("a", 1)], {"b": Leaf("b")}, Leaf("c"), [("x", 1.5)], (2, 3))
    assert isinstance(back.shape, tuple) and isinstance(back.pairs[0], tuple)


def test_an_added_field_is_left_out_at_its_default_and_its_group_goes_together():
    assert "note" not in encode(Tree("t")) and "low" not in encode(Tree("t"))
    assert encode(Tree("t", note="n"))["note"] == "n"
    half = encode(Tree("t", low=1.0))
    assert (half["low"], half["high"]) == (1.0, None)      # the group is written whole


def test_reading_forgives_as_the_hand_written_readers_did():
    assert decode(Tree, {"title": "t", "leaves": None, "unknown": 1}) == Tree("t")
    assert decode(Tree, {"title": "t", "best": {}}).best is None
    assert decode(Tree, {"old_title": "was"}).title == "was"            # LEGACY
    assert decode_optional(Leaf, {}) is None and decode_optional(Leaf, None) is None
    with pytest.raises(KeyError, match="title"):
        decode(Tree, {})
