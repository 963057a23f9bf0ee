"""Starting and stopping a broker to its end even when the awaiting task is cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["run_to_completion"]

_T = TypeVar("_T")


async def run_to_completion(awaitable: Awaitable[_T]) -> _T:
    """Await `awaitable` to its end even if the caller is cancelled meanwhile, then re-raise the
    cancellation: a broker half started or half stopped would leak its socket or process."""
    task = asyncio.ensure_future(awaitable)
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait([task])  # unlike `await task`, does not cancel it with the caller
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        error = None if task.cancelled() else task.exception()
        raise asyncio.CancelledError from error
    return task.result()
