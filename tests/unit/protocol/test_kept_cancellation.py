"""keep_cancellation: a cancellation that an awaited library call dropped is raised after it."""

from __future__ import annotations

import asyncio

import pytest

from shuffledp.protocol.kept_cancellation import keep_cancellation


async def _drops_cancellation() -> str:
    """What Python 3.11's wait_for does when its future completes in the step the caller is
    cancelled: it returns the result and the cancellation is gone."""
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        return "done anyway"
    return "slept"


async def _cancelled_in_the_step(awaitable_factory: object) -> object:
    task = asyncio.create_task(awaitable_factory())  # type: ignore[operator]
    await asyncio.sleep(0)  # the task now waits inside the call
    task.cancel()
    return await task


def test_a_dropped_cancellation_is_raised() -> None:
    # The control: without the wrapper the cancellation is lost (so the test below can fail).
    assert asyncio.run(_cancelled_in_the_step(_drops_cancellation)) == "done anyway"
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(_cancelled_in_the_step(lambda: keep_cancellation(_drops_cancellation())))


def test_wait_for_completing_as_the_caller_is_cancelled() -> None:
    """The race itself, made deterministic: the future gets its result and the caller its
    cancellation in one step. 3.11's wait_for returns 1; 3.12's raises; either way the wrapped
    call raises CancelledError."""

    async def race() -> object:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(keep_cancellation(asyncio.wait_for(future, 10)))
        await asyncio.sleep(0)
        future.set_result(1)
        task.cancel()
        return await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(race())


def test_a_dropped_timeout_expiry_is_still_a_timeout() -> None:
    async def expires() -> object:
        async with asyncio.timeout(0.01):
            return await keep_cancellation(_drops_cancellation())

    with pytest.raises(TimeoutError):
        asyncio.run(expires())


def test_a_call_that_is_not_cancelled_returns_its_result() -> None:
    async def plain() -> str:
        await asyncio.sleep(0)
        return "value"

    assert asyncio.run(keep_cancellation(plain())) == "value"
