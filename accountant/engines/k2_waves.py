"""k = 2: the certificate of max_a F(a) by sweeps run side by side, in waves of batched contour
evaluations (accountant/engines/k2_contour.py).

The bound for a block [a1, a2] of one direction is that direction of F(a1) for the n - d users
left once d of the block's users are revealed, plus the chance that more must be
(:func:`k2_revealed_users`). The range (near, (n - 1) / 2] of each direction is cut into
segments at geometric edges (ratio SEGMENT_RATIO), and each segment is swept from its start: a
block that clears (bound at most the target, the best F(a) found times 1 + tolerance) is
followed by one 1.5 times larger, one that fails by one half its size, down to single a, whose
bound is F(a)'s direction itself (exact). Every segment's next block is evaluated in the same
wave, one array pass for all (:func:`k2_contour.directions_many`): at n = 1e6 about a hundred
segments, so a certificate of thousands of blocks takes tens of passes instead of thousands of
calls. A block whose bracket straddles the target counts as failed (it is split); only a row
the contour declines goes to the caller's slower chain (``fallback``).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

from shuffledp.accountant.engines.k2_contour import (
    Circle,
    Coefs,
    direction_one,
    directions_many,
)
from shuffledp.accountant.engines.k2_exact import WorkMeter
from shuffledp.accountant.engines.pairs import Bracket

#: The segments' edges grow by this factor from the end of the exactly evaluated a.
SEGMENT_RATIO = 1.05
#: A block after one that cleared is this much larger.
GROWTH = 1.5
#: The share of the secant's size a block takes (below 1: the line through a success and a
#: failure overshoots where the bound curves upwards).
SECANT_SHARE = 0.9
#: A segment with more than this many blocks of its current size left is split in two.
SPLIT = 16


@dataclass(slots=True)
class _Segment:
    """One sweep over [position, end] of one direction. The next block's size: 1.5 times the
    last after a success, half after a failure; where a recent success (size, bound) and a
    recent failure are both known, the size where the line through them meets the target
    (times SECANT_SHARE), kept within those two rules' range (so a poor line only costs what
    the plain rule would)."""

    forward: bool
    position: int
    end: int
    size: int
    cleared: bool = False
    success: tuple[int, float] | None = None
    failure: tuple[int, float] | None = None

    def next_block(self, target: float) -> tuple[int, int]:
        step = math.ceil(GROWTH * self.size) if self.cleared else max(1, self.size // 2)
        if self.success is not None and self.failure is not None:
            (w1, b1), (w2, b2) = self.success, self.failure
            if w2 > w1 and b2 > b1:
                aim = w1 + SECANT_SHARE * (target - b1) * (w2 - w1) / (b2 - b1)
                low, high = (self.size, step) if self.cleared else (step, self.size - 1)
                step = max(low, min(high, math.floor(aim)), 1)
        return self.position, min(self.end, self.position + step - 1)

    def advance(self, block: tuple[int, int], bound: float, settled: bool) -> None:
        """A settled block (cleared, or a single a) is covered; a failed one is tried again,
        smaller."""
        self.size, self.cleared = block[1] - block[0] + 1, settled and block[0] < block[1]
        if self.cleared:
            self.success = (self.size, bound)
        elif not settled:
            self.failure = (self.size, bound)
        if settled:
            self.position = block[1] + 1

    def split(self) -> _Segment | None:
        """Where more than SPLIT blocks of the current size remain, the second half of the rest
        as a segment of its own, starting at this one's size (so that no sweep runs far longer
        than the others: the waves stay few)."""
        rest = self.end - self.position + 1
        if rest <= SPLIT * self.size:
            return None
        middle = self.position + rest // 2
        other = _Segment(
            self.forward, middle, self.end, self.size, self.cleared, self.success, self.failure
        )
        self.end = middle - 1
        return other

    @property
    def done(self) -> bool:
        return self.position > self.end


def segments(near: int, half: int) -> list[_Segment]:
    """Both directions' segments of (near, half], at edges growing by SEGMENT_RATIO; each
    first tries its whole range (the weaker direction then clears in one block each)."""
    edges = [near + 1]
    while edges[-1] <= half:
        edges.append(max(edges[-1] + 1, math.ceil(edges[-1] * SEGMENT_RATIO)))
    edges[-1] = half + 1
    return [
        _Segment(forward, lo, hi - 1, 2 * (hi - lo))
        for forward in (True, False)
        for lo, hi in itertools.pairwise(edges)
    ]


@dataclass(frozen=True, slots=True)
class Certifier:
    """What a k = 2 certificate needs from its caller: the mechanism's n and eps0, the current
    target (best F(a) times 1 + tolerance), the place to offer single values (they may raise
    the best), and the slower chain for a block or single a the contour declines (its bound,
    tail included)."""

    n: int
    eps0: float
    co: Coefs
    circle: Circle
    target: Callable[[], float]
    tail_target: Callable[[], float]
    offer: Callable[[int, bool, Bracket], None]
    fallback: Callable[[tuple[int, int], bool], float]


def certify_in_waves(cert: Certifier, near: int, half: int, meter: WorkMeter, work: int) -> float:
    """The largest bound of a cover of (near, half] in both directions (every block's bound
    and every single F(a) direction's upper end). Past ``work`` the segments' uncovered rests
    are bounded as one block each (valid, looser)."""
    active = segments(near, half)
    upper = 0.0
    while active and meter.work <= work:
        target = cert.target()
        blocks = [seg.next_block(target) for seg in active]
        for seg, block, bound in zip(
            active, blocks, _bounds(cert, active, blocks, meter), strict=True
        ):
            settled = bound <= cert.target() or block[0] == block[1]
            if settled:
                upper = max(upper, bound)
            seg.advance(block, bound, settled)
        active = [seg for seg in active if not seg.done]
        active += [rest for seg in active if (rest := seg.split()) is not None]
    if active:  # out of work: each rest as one block
        rests = [(seg.position, seg.end) for seg in active]
        upper = max([upper, *_bounds(cert, active, rests, meter)])
    return upper


def _bounds(
    cert: Certifier, segs: list[_Segment], blocks: list[tuple[int, int]], meter: WorkMeter
) -> list[float]:
    """Each block's bound in one batched pass (singles first: their values may raise the
    target the blocks are judged against); a row the batch leaves open is retried alone (the
    window moved, or a circle of its own), and one the contour declines goes to the
    fallback."""
    rows: list[tuple[int, int]] = []
    tails: list[float] = []
    for seg, (a1, a2) in zip(segs, blocks, strict=True):
        revealed, tail = (
            (0, 0.0) if a1 == a2 else k2_revealed_users(a2 - a1, cert.eps0, cert.tail_target())
        )
        reduced = cert.n - revealed
        rows.append((reduced, a1 if seg.forward else reduced - 1 - a1))
        tails.append(tail)
    brackets = directions_many(rows, cert.co, cert.circle, meter)
    out = [math.inf] * len(blocks)
    order = sorted(range(len(blocks)), key=lambda i: blocks[i][0] != blocks[i][1])
    for i in order:
        seg, block, bracket = segs[i], blocks[i], brackets[i]
        if bracket is None:
            bracket = direction_one(*rows[i], cert.co, meter, cert.circle)
        if block[0] == block[1]:
            if bracket is None:
                out[i] = cert.fallback(block, seg.forward)
            else:
                cert.offer(block[0], seg.forward, bracket)
                out[i] = bracket.upper
            continue
        # (a bracket that straddles the target counts as failed: the block is split, which
        # costs two rows where a slower evaluator, at n = 1e8, would cost 0.2 s)
        out[i] = (
            bracket.upper + tails[i] if bracket is not None else cert.fallback(block, seg.forward)
        )
    return out


@functools.lru_cache(maxsize=65536)
def k2_revealed_users(block: int, eps0: float, tail_target: float) -> tuple[int, float]:
    """(d, tail): how many of a block's users the k = 2 block bound reveals, and the chance
    that the mixture below needs more, at most max(tail_target, 0) (d = block, tail 0, when
    that is cheaper than the chance).

    Why fewer than the whole block: in F(a) with a1 <= a <= a2, the a - a1 middle users on x0
    each report x0 with probability pt = (pb/pt) pb + (1 - pb/pt) 1: a mixture of an x1 user
    (probability pb/pt = e^-eps0) and a user who reports x0 for sure. The mixture is over a
    variable independent of u, so by the joint convexity of the hockey-stick divergence F(a)
    <= E_D[G(D)], where D ~ Bin(a - a1, theta), theta = 1 - e^-eps0, counts the sure users and
    G(D) is the delta of the rest, a shift of F(a1) for n - D users (the sure reports are a
    constant the adversary subtracts). G is non-decreasing (an extra x1 user is independent
    noise added to both laws: post-processing), and Bin(a - a1, theta) is stochastically below
    Bin(a2 - a1, theta), so every a of the block has F(a) <= E[G(D)] with D ~ Bin(a2 - a1,
    theta) <= G(d) + P(D > d) (G <= 1). Each direction of F is a hockey-stick divergence of its
    own, so the argument holds for each. The old bound revealed the whole block (d = a2 - a1);
    this one reveals about theta of it (0.39 at eps0 = 0.5, 0.63 at eps0 = 1).

    P(D > d) is bounded by Chernoff, P(D >= m) <= exp(-b KL(m/b || theta)) for m > b theta,
    with theta rounded up (a larger theta only raises the bound) and the exponent shrunk by
    1e-9 relative for its rounding: a valid, safe-side tail.
    """
    theta = min(1.0, -math.expm1(-eps0) * (1.0 + 1e-15))
    if block <= 0 or not tail_target > 0.0 or theta >= 1.0:
        return block, 0.0
    log_target = math.log(tail_target)
    # The smallest d with P(D > d) <= the target, by bisection: below the mean the bound is the
    # trivial 1 (fails), at d = block the tail is 0 (holds).
    low, revealed = math.floor(block * theta) - 1, block
    while revealed - low > 1:
        mid = (low + revealed) // 2
        if binomial_upper_tail(block, theta, mid + 1) <= log_target:
            revealed = mid
        else:
            low = mid
    tail = 0.0 if revealed >= block else math.exp(binomial_upper_tail(block, theta, revealed + 1))
    return revealed, tail


def binomial_upper_tail(trials: int, theta: float, at_least: int) -> float:
    """log of Chernoff's bound on P(Bin(trials, theta) >= at_least), at_least > trials theta:
    -trials KL(at_least / trials || theta), the exponent shrunk by 1e-9 relative (safe side);
    0 (the trivial bound) at or below the mean, -inf above trials."""
    if at_least > trials:
        return -math.inf
    x = at_least / trials
    if x <= theta:
        return 0.0
    kl = x * math.log(x / theta)
    if x < 1.0:
        kl += (1.0 - x) * math.log((1.0 - x) / (1.0 - theta))
    return -trials * kl * (1.0 - 1e-9)
