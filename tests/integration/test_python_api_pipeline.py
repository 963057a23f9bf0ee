"""shuffledp.simulate_async inside a running event loop (a notebook's situation): a full
multi-process round completes while the loop keeps serving its other tasks."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

import shuffledp
from shuffledp.randomness import seed_value

pytestmark = pytest.mark.integration

TICK = 0.05


def test_simulate_async_runs_in_a_running_loop_that_stays_responsive() -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(TICK)
            ticks += 1

    async def notebook() -> tuple[shuffledp.RoundLog, float]:
        other = asyncio.create_task(ticker())  # e.g. the kernel's own work
        started = time.monotonic()
        try:
            report = await shuffledp.simulate_async(
                n=300, k=5, eps0=2.0, hops=2, seed=np.random.default_rng(5)
            )
        finally:
            other.cancel()
        return report, time.monotonic() - started

    report, seconds = asyncio.run(notebook())
    assert report.report.n_received == 300 and sum(report.report.histogram) == 300
    assert report.randomness_source == "generator"
    # The round's seed is the one drawn from the Generator: reproducible from default_rng(5).
    assert report.simulation.seed == seed_value(np.random.default_rng(5))
    # The loop was not blocked: the other task ran through at least half of the round (the
    # accountant's inversion at the end, under 2 s, is the only part that holds the loop).
    assert ticks * TICK >= 0.5 * seconds - 2.0, (ticks, seconds)


def test_simulate_async_cancelled_stops_what_it_started() -> None:
    """A cancelled cell (Ctrl-C / interrupt in a notebook) leaves no process behind."""
    import psutil

    before = {p.pid for p in psutil.Process().children(recursive=True)}

    async def interrupted() -> None:
        # Large enough that the round cannot finish before it is cancelled (n = 300 did, in
        # under 4 s on an idle machine, and then there was nothing to cancel).
        task = asyncio.create_task(shuffledp.simulate_async(n=50_000, k=5, hops=2))
        for _ in range(300):  # cancel as soon as the components run (at most 30 s)
            await asyncio.sleep(0.1)
            # Only this round's processes count (the worker may hold others from earlier
            # tests: counting them cancelled the round before anything of it had started).
            started = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
            if len(started) >= 3 or task.done():
                break
        assert started, "nothing was started"
        assert not task.done(), "the round ended before it could be cancelled"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupted())
    left = [
        p
        for p in psutil.Process().children(recursive=True)
        if p.pid not in before and p.is_running()
    ]
    assert left == [], [p.cmdline() for p in left]
