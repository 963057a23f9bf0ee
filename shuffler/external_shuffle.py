"""An external shuffle: one uniform permutation of a batch too large to hold in memory.

A hop's mixer (shuffler/workers.py) receives the whole batch of a hop from its peelers and must
release it in one uniformly random order, with a memory that does not grow with the batch.
:class:`BucketShuffle` does it the way Prochlo's Stash Shuffle and every external sort do:

1. **spread**: every item, as it arrives, is appended to one of ``buckets`` files on disk, the
   file drawn uniformly at random and independently for each item (the OS CSPRNG unless a
   source is passed);
2. **release**: the files are read back one after the other, bucket 0 first; each bucket is
   permuted in memory (:func:`~shuffledp.shuffler.permute.uniform_permutation`) and its items
   are yielded in that order.

The result is uniform over all n! orders, exactly, and stays uniform given the bucket sizes
(docs/hop-workers.md proves both). Memory: one bucket at a time, n / buckets items on average;
:func:`bucket_count` chooses ``buckets`` so that a bucket holds about :data:`BUCKET_ITEMS`
items. The files are written with ordinary buffered appends: they are scratch space, not a
journal (a mixer that crashes loses them and says so, shuffler/workers.py); a well-kept store
(sqlite) would add a B-tree and a page cache for data that is written once and read once in
order, which plain files do without.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from shuffledp.errors import InvalidParameterError
from shuffledp.randomness import RandomLike, RandomSource, as_random_source
from shuffledp.shuffler.permute import uniform_permutation
from shuffledp.validation import require_int

__all__ = ["BUCKET_ITEMS", "BucketShuffle", "bucket_count"]

BUCKET_ITEMS = 1 << 16
"""Items per bucket the mixer aims at: 65,536 items of a few hundred bytes are tens of MiB."""
MAX_BUCKETS = 4096
"""At most this many bucket files (open file handles) per round."""


def bucket_count(expected: int, bucket_items: int = BUCKET_ITEMS) -> int:
    """How many buckets spread ``expected`` items about ``bucket_items`` to a bucket (at least
    1, at most MAX_BUCKETS)."""
    require_int("expected", expected, 0)
    require_int("bucket_items", bucket_items, 1)
    return max(1, min(MAX_BUCKETS, math.ceil(expected / bucket_items)))


class BucketShuffle:
    """Items of ``item_length`` bytes spread over ``buckets`` files in a fresh folder under
    ``directory`` (the system's temporary folder if None); see the module docstring.

    ``add`` and ``add_many`` spread items; ``release`` yields them all, once, uniformly
    permuted, and can run once; ``close`` removes the files (also after a failure; use as a
    context manager)."""

    def __init__(
        self,
        *,
        item_length: int,
        buckets: int,
        directory: str | os.PathLike[str] | None = None,
        rng: RandomLike = None,
    ) -> None:
        require_int("item_length", item_length, 1)
        require_int("buckets", buckets, 1, MAX_BUCKETS, bound=f"[1, {MAX_BUCKETS}]")
        self._item_length = item_length
        self._rng: RandomSource = as_random_source(rng)
        self._folder = Path(tempfile.mkdtemp(prefix="shuffledp-mix-", dir=directory))
        self._files: list[BinaryIO] = [
            open(self._folder / f"bucket-{b:04d}", "w+b")  # noqa: SIM115 (closed in close())
            for b in range(buckets)
        ]
        self._sizes = [0] * buckets
        self._released = False

    @property
    def count(self) -> int:
        """Items added so far."""
        return sum(self._sizes)

    @property
    def buckets(self) -> int:
        return len(self._files)

    @property
    def folder(self) -> Path:
        return self._folder

    def add(self, item: bytes) -> None:
        self.add_many([item])

    def add_many(self, items: Sequence[bytes]) -> None:
        """Append each item to a bucket drawn uniformly at random (InvalidParameterError for an
        item of another length, before anything is written)."""
        if self._released:
            raise InvalidParameterError("a released external shuffle takes no more items")
        for item in items:
            if len(item) != self._item_length:
                raise InvalidParameterError(
                    f"every item must be {self._item_length} bytes, got {len(item)}"
                )
        if not items:
            return
        chosen = self._rng.integers(len(self._files), len(items))
        order = np.argsort(chosen, kind="stable")
        start = 0
        sorted_buckets = chosen[order]
        for bucket in np.unique(sorted_buckets):
            stop = int(np.searchsorted(sorted_buckets, bucket, side="right"))
            picked = order[start:stop]
            self._files[int(bucket)].write(b"".join(items[int(i)] for i in picked))
            self._sizes[int(bucket)] += len(picked)
            start = stop

    def release(self) -> Iterator[bytes]:
        """Every item added, once, in one uniformly random order (one bucket in memory at a
        time); final."""
        if self._released:
            raise InvalidParameterError("an external shuffle is released once")
        self._released = True
        length = self._item_length
        for handle, size in zip(self._files, self._sizes, strict=True):
            handle.flush()
            handle.seek(0)
            data = handle.read(size * length)
            if len(data) != size * length:
                raise OSError(f"bucket file {handle.name} is short: the mixer's disk lost items")
            handle.truncate(0)
            order = uniform_permutation(size, self._rng)
            for i in order:
                start = int(i) * length
                yield data[start : start + length]

    def close(self) -> None:
        """Remove the bucket files and their folder."""
        for handle in self._files:
            handle.close()
            Path(handle.name).unlink(missing_ok=True)
        self._files = []
        with contextlib.suppress(OSError):
            self._folder.rmdir()

    def __enter__(self) -> BucketShuffle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
