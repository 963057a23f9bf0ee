"""The bounded seen-set (protocol/seen_set.py): it answers every add exactly as one unbounded
Python set does (the oracle), across any number of spills to disk, holds at most ``in_memory``
digests in memory, and forgets everything on clear."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.seen_set import SeenSet


def digest(i: int) -> bytes:
    return hashlib.sha256(i.to_bytes(4, "little")).digest()


@settings(max_examples=60, deadline=None)
@given(
    stream=st.lists(st.integers(0, 40), max_size=120),
    in_memory=st.integers(1, 6),
)
def test_every_answer_is_the_unbounded_sets(stream: list[int], in_memory: int) -> None:
    """A small alphabet makes copies frequent, so many a copy's first occurrence has been
    spilled to disk by the time it comes back (in_memory <= 6 of up to 41 distinct digests)."""
    seen = SeenSet(in_memory=in_memory)
    oracle: set[bytes] = set()
    for i in stream:
        item = digest(i)
        assert seen.add(item) is (item not in oracle)
        oracle.add(item)
        assert len(seen) == len(oracle)
        assert seen.spilled >= len(oracle) - in_memory  # at most in_memory held in memory
    assert all(digest(i) in seen for i in range(41)) is (len(oracle) == 41)
    assert {i for i in range(41) if digest(i) in seen} == {i for i in stream}
    seen.clear()


def test_a_copy_of_a_spilled_digest_is_refused_and_clear_forgets() -> None:
    seen = SeenSet(in_memory=3)
    assert all(seen.add(digest(i)) for i in range(10))
    assert seen.spilled == 9 and len(seen) == 10  # three spills of three, one in memory
    assert [seen.add(digest(i)) for i in range(10)] == [False] * 10
    assert 42 not in seen and digest(10) not in seen
    seen.clear()
    assert len(seen) == 0 and seen.spilled == 0 and digest(0) not in seen
    assert seen.add(digest(0))  # a fresh round: new again, in memory, then spilled again
    assert all(seen.add(digest(i)) for i in range(1, 4)) and seen.spilled == 3


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"in_memory": 0}, "in_memory must be >= 1, got 0"),
        ({"cache_kib": -5}, "cache_kib must be >= 1, got -5"),
        ({"in_memory": 2.5}, "in_memory must be an integer, got 2.5"),
    ],
)
def test_parameters_are_validated(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        SeenSet(**arguments)  # type: ignore[arg-type]
