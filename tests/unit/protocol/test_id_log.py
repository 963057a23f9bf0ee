"""protocol/id_log.py: an IdLog answers every read exactly as one Python list would (the oracle),
across spills to its file, from every position and with every limit."""

from __future__ import annotations

import random

import pytest

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.id_log import IdLog


@pytest.mark.parametrize("in_memory", [1, 2, 7, 1000])
def test_an_id_log_reads_as_a_list_across_spills(in_memory: int) -> None:
    rng = random.Random(in_memory)
    log, oracle = IdLog(in_memory=in_memory), []
    for _ in range(120):
        value = rng.randrange(2**64)
        log.append(value)
        oracle.append(value)
        position = rng.randrange(len(oracle) + 2)
        limit = rng.choice([None, 0, 1, 3, 50])
        expected = oracle[position:] if limit is None else oracle[position : position + limit]
        assert log.since(position, limit) == expected
    assert len(log) == 120
    assert log.spilled == (120 // in_memory) * in_memory
    assert log.since(0) == oracle
    log.clear()
    assert len(log) == 0 and log.since(0) == []


def test_an_id_log_refuses_bad_sizes() -> None:
    with pytest.raises(InvalidParameterError, match="in_memory"):
        IdLog(in_memory=0)
    with pytest.raises(InvalidParameterError, match="position"):
        IdLog().since(-1)
