"""The mixer's external shuffle (shuffler/external_shuffle.py).

- Invariant: every item added comes out exactly once, whatever the number of buckets.
- Uniformity, statistically, with the OS CSPRNG (what a mixer uses): over many small rounds,
  (a) the table sender x output position (a chi-square with (n-1)^2 degrees of freedom: every
  row and column of the table sums to the number of rounds) and (b) the frequency of each of
  the n! orders (a chi-square goodness of fit with n! - 1 degrees of freedom). Each check fails
  by chance with probability ALPHA = 1e-6 (two checks: false alarm <= 2e-6 per run).
- Power: the same statistic rejects a broken external shuffle that does not permute inside its
  buckets (the items of a bucket come out in arrival order), so the check can fail.
- The bucket files are removed on close.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from scipy import stats

from shuffledp.errors import InvalidParameterError
from shuffledp.shuffler.external_shuffle import BucketShuffle, bucket_count

ALPHA = 1e-6


def shuffled(n: int, buckets: int) -> list[int]:
    """One external shuffle of items 0..n-1 (one byte each): the output, as sender indices."""
    with BucketShuffle(item_length=1, buckets=buckets) as store:
        store.add_many([bytes([i]) for i in range(n)])
        return [item[0] for item in store.release()]


def test_every_item_comes_out_exactly_once() -> None:
    items = [os.urandom(40) for _ in range(3000)]
    with BucketShuffle(item_length=40, buckets=7) as store:
        for start in range(0, len(items), 500):
            store.add_many(items[start : start + 500])
        assert store.count == len(items)
        out = list(store.release())
    assert sorted(out) == sorted(items)
    assert out != items  # probability 1/3000! of failing


def sender_position_pvalue(rounds: int, n: int, buckets: int) -> float:
    table = np.zeros((n, n), dtype=np.int64)
    for _ in range(rounds):
        for position, sender in enumerate(shuffled(n, buckets)):
            table[sender, position] += 1
    expected = rounds / n
    statistic = float(((table - expected) ** 2 / expected).sum())
    return float(stats.chi2.sf(statistic, (n - 1) ** 2))


def test_sender_by_output_position_is_uniform() -> None:
    assert sender_position_pvalue(rounds=1500, n=5, buckets=3) > ALPHA


def test_every_order_is_equally_likely() -> None:
    n, rounds = 4, 2400  # 100 expected per order
    orders = {order: 0 for order in itertools.permutations(range(n))}
    for _ in range(rounds):
        orders[tuple(shuffled(n, 2))] += 1
    counts = np.array(list(orders.values()))
    assert stats.chisquare(counts).pvalue > ALPHA


def test_the_check_rejects_a_shuffle_that_skips_the_bucket_permutation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        "shuffledp.shuffler.external_shuffle.uniform_permutation",
        lambda size, rng=None: np.arange(size),
    )
    assert sender_position_pvalue(rounds=1000, n=5, buckets=3) < ALPHA


def test_files_are_removed_and_bad_items_refused(tmp_path: os.PathLike[str]) -> None:
    store = BucketShuffle(item_length=3, buckets=4, directory=tmp_path)
    with pytest.raises(InvalidParameterError, match="every item must be 3 bytes, got 2"):
        store.add_many([b"abc", b"ab"])
    assert store.count == 0  # nothing written before the check
    store.add(b"xyz")
    assert list(store.release()) == [b"xyz"]
    store.close()
    assert list(os.scandir(tmp_path)) == []


def test_bucket_count_keeps_buckets_near_their_target() -> None:
    assert bucket_count(0) == 1
    assert bucket_count(1_000_000, 65_536) == 16
    assert bucket_count(10**9) == 4096  # capped: buckets then hold 244,141 items on average
