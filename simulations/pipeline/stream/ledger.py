"""Each user's account: the rounds it took part in and its composed guarantee.

Round e is the mechanism ``ShuffledKRR(n_e, k, eps0)`` with n_e the reports the analyzer
received. A user's guarantee is the composition of the rounds it reported in, with
dp-accounting privacy-loss distributions (PLDs) of each bound family's dominating pair
(:func:`shuffledp.accountant.composition.compose_rounds`; minimum over the families). A round
that failed after its reports were sent is charged as a lone k-RR report (n = 1, the local eps0
guarantee, which holds whatever happened downstream).

Cost
    Users with the same multiset of round sizes have the same composition (composition is
    commutative), so composed PLDs are memoised by the sorted tuple of a user's round sizes and
    built incrementally (previous composition + this round) with
    :class:`~shuffledp.accountant.composition.FastPLD` (dp-accounting's arithmetic, its tail
    search vectorised); an entry is dropped as soon as no user holds it, and beyond
    :data:`LEDGER_MAX_BYTES` the least recently used are dropped and rebuilt from the round
    sizes when needed. The cost is one composition per family per distinct new history, not
    per user. The grid ``discretization`` (default :data:`STREAM_DISCRETIZATION`) trades
    precision for speed: every round's losses are rounded *up* to the grid (safe side), so after
    r rounds the composed delta at eps is at most the exact composed delta of the pairs at
    eps - r * discretization.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from shuffledp.accountant.mechanism import ShuffledKRR
from shuffledp.validation import require_int, require_positive

if TYPE_CHECKING:
    from shuffledp.accountant.composition.pair_pld import FamilyPLD
    from shuffledp.simulations.pipeline.stream.budget import Budget

__all__ = ["LEDGER_MAX_BYTES", "STREAM_DISCRETIZATION", "UserLedger", "WorstHistory"]

#: Privacy-loss grid of the per-user composition: 1e-3 (dp-accounting's default is 1e-4). After
#: r rounds the composed eps is overstated by at most r * grid; measured on 10 rounds of
#: n ~ 1,000, k = 192, eps0 = 1: eps(1e-6) = 0.5770 at 1e-4, 0.5815 at 1e-3 (+0.8 %), 0.6276 at
#: 1e-2 (+8.8 %). On the Paris slice (1,026 users, 57 weekly epochs, eps0 = 4, no budget) the
#: accounting took 14 s and kept at most 400 MiB at 1e-3, 2.8 s and 40 MiB at 1e-2 (the worst
#: user's eps: 90.413 and 90.415).
STREAM_DISCRETIZATION = 1e-3

#: Memory the per-user composition may keep between epochs (least recently used histories are
#: dropped beyond it and rebuilt when their user comes back).
LEDGER_MAX_BYTES = 512 * 2**20


@dataclass(frozen=True, slots=True, kw_only=True)
class WorstHistory:
    """The weakest guarantee among users: ``eps`` at ``delta_target`` (and ``delta_at_budget``,
    the delta at the budget's eps), the round sizes of that history in epoch order for one user
    holding it (``epochs``, ``sizes``), and how many users share the same multiset of sizes."""

    eps: float
    delta_target: float
    delta_at_budget: float | None
    rounds: int
    epochs: tuple[int, ...]
    sizes: tuple[int, ...]
    users: int
    pair: str


class UserLedger:
    """Each user's rounds and the composed guarantee (module docstring, "Privacy", "Cost").

    A round of size n >= 2 is ShuffledKRR(n, k, eps0); n = 1 is one k-RR report alone.
    """

    def __init__(
        self,
        *,
        k: int,
        eps0: float,
        discretization: float = STREAM_DISCRETIZATION,
        max_bytes: int = LEDGER_MAX_BYTES,
    ) -> None:
        from shuffledp.accountant.composition.pair_pld import default_families

        ShuffledKRR(n=2, k=k, eps0=eps0)  # validates k and eps0
        require_positive("discretization", discretization)
        require_int("max_bytes", max_bytes, 0)
        self.k, self.eps0, self.discretization = k, float(eps0), float(discretization)
        self.max_bytes = max_bytes
        self.families = default_families()
        self._round_cache: dict[int, tuple[FamilyPLD, ...]] = {}
        #: sorted round sizes -> per-family composed PLD (None: saturated), least recently used
        #: first
        self._composed: OrderedDict[tuple[int, ...], tuple[FamilyPLD, ...]] = OrderedDict()
        self._bytes: dict[tuple[int, ...], int] = {}
        #: key -> number of users whose history it is
        self._holders: Counter[tuple[int, ...]] = Counter()
        #: user -> sorted round sizes (the memo key)
        self.keys: dict[str, tuple[int, ...]] = {}
        #: user -> [(stream epoch, n)] in epoch order
        self.history: dict[str, list[tuple[int, int]]] = {}
        self.exhausted: set[str] = set()
        self.seconds = 0.0
        self.compositions = 0
        self.evictions = 0
        self.peak_bytes = 0

    def round_plds(self, n: int) -> tuple[FamilyPLD, ...]:
        """One PLD per family for a round of n reports."""
        from shuffledp.accountant.composition.pair_pld import local_krr_pld, pair_fast_pld

        require_int("round size", n, 1)
        if n not in self._round_cache:
            if n == 1:
                local = local_krr_pld(self.k, self.eps0, self.discretization)
                self._round_cache[n] = tuple(local for _ in self.families)
            else:
                mech = ShuffledKRR(n=n, k=self.k, eps0=self.eps0)
                self._round_cache[n] = tuple(
                    pair_fast_pld(family, mech, self.discretization) for family in self.families
                )
        return self._round_cache[n]

    def composed(
        self, key: tuple[int, ...], n: int
    ) -> tuple[tuple[int, ...], tuple[FamilyPLD, ...]]:
        """The history ``key`` plus a round of n: its key and per-family composed PLDs."""
        from shuffledp.accountant.composition.pair_pld import compose_family

        child = tuple(sorted((*key, n)))
        cached = self._composed.get(child)
        if cached is not None:
            self._composed.move_to_end(child)
            return child, cached
        round_plds = self.round_plds(n)
        if not key:
            result = round_plds
        else:
            parent = self._composed.get(key)
            if parent is None:  # pruned or never built: rebuild from the root
                _, parent = self._rebuild(key)
            result = tuple(compose_family(a, b) for a, b in zip(parent, round_plds, strict=True))
            self.compositions += len(result)
        self._composed[child] = result
        self._bytes[child] = sum(0 if pld is None else pld.nbytes for pld in result)
        return child, result

    def _plds_of(self, key: tuple[int, ...]) -> tuple[FamilyPLD, ...]:
        """A held history's composed PLDs: stored, or rebuilt (then the rebuild's intermediate
        steps are dropped again)."""
        plds = self._composed.get(key)
        if plds is None:
            _, plds = self._rebuild(key)
            self.prune()
        return plds

    def _rebuild(self, key: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[FamilyPLD, ...]]:
        current: tuple[int, ...] = ()
        plds: tuple[FamilyPLD, ...] = ()
        for n in key:
            current, plds = self.composed(current, n)
        return current, plds

    def delta_at(self, plds: Sequence[FamilyPLD], eps: float) -> tuple[float, str]:
        """min over families of the composed delta at eps, and the family that gave it."""
        from shuffledp.accountant.composition.pair_pld import family_delta

        values = [family_delta(pld, eps) for pld in plds]
        best = int(np.argmin(values))
        return values[best], self._label(best)

    def eps_at(self, plds: Sequence[FamilyPLD], delta: float) -> tuple[float, str]:
        """min over families of the composed eps at delta, and the family that gave it."""
        from shuffledp.accountant.composition.pair_pld import family_eps

        values = [family_eps(pld, delta) for pld in plds]
        best = int(np.argmin(values))
        return values[best], self._label(best)

    def _label(self, index: int) -> str:
        """The family's name, with its note when it used a looser pair in some round size."""
        from shuffledp.accountant.composition.pair_pld import family_label

        return family_label(self.families[index])

    def fallback_notes(self) -> tuple[str, ...]:
        """One line per family that used a looser pair where its own was over its outcome cap."""
        notes = []
        for family in self.families:
            note = family.fallback_note()
            if note is not None:
                notes.append(f"{family.name}: {note}")
        return tuple(notes)

    def delta_after(self, user: str, n: int, eps: float) -> float:
        """The user's composed delta at eps if it also took part in a round of n."""
        started = time.perf_counter()
        _, plds = self.composed(self.keys.get(user, ()), n)
        value = self.delta_at(plds, eps)[0]
        self.seconds += time.perf_counter() - started
        return value

    def charge(self, user: str, epoch: int, n: int) -> None:
        """Record that the user took part in stream epoch ``epoch``'s round of n."""
        started = time.perf_counter()
        previous = self.keys.get(user, ())
        key, _ = self.composed(previous, n)
        self.keys[user] = key
        self._holders[key] += 1
        if previous:
            self._holders[previous] -= 1
            if self._holders[previous] <= 0:
                # Nobody holds it any more (the others of this round already have the child).
                del self._holders[previous]
                self._forget(previous)
        self.history.setdefault(user, []).append((epoch, n))
        self.seconds += time.perf_counter() - started

    def _forget(self, key: tuple[int, ...]) -> None:
        if key in self._composed:
            del self._composed[key]
            del self._bytes[key]

    def user_delta(self, user: str, eps: float) -> float:
        """The user's composed delta at eps over the rounds it took part in (0 for none)."""
        key = self.keys.get(user, ())
        if not key:
            return 0.0
        started = time.perf_counter()
        value = self.delta_at(self._plds_of(key), eps)[0]
        self.seconds += time.perf_counter() - started
        return value

    def prune(self) -> None:
        """Forget composed PLDs no user's history is, then the least recently used ones while
        they hold more than ``max_bytes`` (rebuilt from the rounds if needed again)."""
        for key in [key for key in self._composed if key not in self._holders]:
            self._forget(key)
        total = sum(self._bytes.values())
        self.peak_bytes = max(self.peak_bytes, total)
        while total > self.max_bytes and self._composed:
            key, _ = self._composed.popitem(last=False)
            total -= self._bytes.pop(key)
            self.evictions += 1

    @property
    def stored_histories(self) -> int:
        return len(self._composed)

    def worst(self, delta_target: float, budget: Budget | None) -> WorstHistory | None:
        """The history with the largest composed eps at ``delta_target`` (ties: the larger
        delta at the budget's eps), or None when nobody reported."""
        started = time.perf_counter()
        holders: dict[tuple[int, ...], list[str]] = {}
        for user, key in self.keys.items():
            holders.setdefault(key, []).append(user)
        best: tuple[float, float, tuple[int, ...], str] | None = None
        for key in holders:
            plds = self._plds_of(key)
            eps, pair = self.eps_at(plds, delta_target)
            at_budget = self.delta_at(plds, budget.eps)[0] if budget is not None else -1.0
            candidate = (eps, at_budget, key, pair)
            if best is None or (candidate[0], candidate[1]) > (best[0], best[1]):
                best = candidate
        self.seconds += time.perf_counter() - started
        if best is None:
            return None
        eps, at_budget, key, pair = best
        example = min(holders[key], key=lambda user: self.history[user])
        rounds = self.history[example]
        return WorstHistory(
            eps=eps,
            delta_target=delta_target,
            delta_at_budget=None if budget is None else at_budget,
            rounds=len(key),
            epochs=tuple(epoch for epoch, _ in rounds),
            sizes=tuple(n for _, n in rounds),
            users=len(holders[key]),
            pair=pair,
        )
