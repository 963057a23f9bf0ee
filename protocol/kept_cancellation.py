"""Awaiting a library call without losing a cancellation it dropped.

Python 3.11's :func:`asyncio.wait_for` returns the awaited result, and drops the cancellation,
when the caller is cancelled in the same event-loop step as the awaited future completes
(CPython gh-86296; 3.12 rebuilt wait_for on :func:`asyncio.timeout`). aiomqtt 2.x awaits every
CONNACK, SUBACK and PUBACK through it, so a Ctrl-C (or a notebook's cancelled cell) that lands
as the broker answers was lost: the round went on to its end. The task still counts the request
(:meth:`asyncio.Task.cancelling` stays raised, since nobody uncancelled it), which is what
:func:`keep_cancellation` checks after the call returns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["keep_cancellation"]

_T = TypeVar("_T")


async def keep_cancellation(awaitable: Awaitable[_T]) -> _T:
    """Await ``awaitable``; if this task was asked to cancel meanwhile and the call returned
    anyway, raise :class:`asyncio.CancelledError` (the call's work is done: a publish was
    acknowledged, a connection made; the caller's cleanup sees it as any other cancellation).

    Inside an :func:`asyncio.timeout` block a dropped expiry is raised the same way, and the
    block turns it into its TimeoutError as usual.
    """
    task = asyncio.current_task()
    requested = 0 if task is None else task.cancelling()
    result = await awaitable
    if task is not None and task.cancelling() > requested:
        raise asyncio.CancelledError("a cancellation dropped by the awaited call")
    return result
