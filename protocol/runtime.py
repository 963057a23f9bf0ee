"""What every stage process shares on top of a transport: an inbox, states and progress.

A stage (a client process, a hop, the analyzer) announces itself on its status topic, retained
but for a client process's (``ready``, then ``done``, ``refused`` or ``failed``; see :func:`~shuffledp.protocol.topics.status_topic`)
and publishes progress counts while it works. A stage publishes to its downstream only after it
saw the downstream's ``ready``: an MQTT broker drops messages for topics nobody subscribes to, so
this is what makes the start order of the processes irrelevant.

:class:`Inbox` pumps ``transport.messages()`` into a queue from a named task, so that waiting for
the next message can time out without closing the transport's async iterator.
:class:`~shuffledp.protocol.stage.Stage` puts these pieces together into the steps every stage
takes (collect, await the downstream's ready, settle).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from shuffledp.errors import OperationalError
from shuffledp.protocol.kept_cancellation import keep_cancellation
from shuffledp.protocol.screen import Mapper, parallel_mapper
from shuffledp.protocol.topics import progress_topic, retains_status, status_topic
from shuffledp.protocol.transport import Message, Transport

__all__ = [
    "READY_STATES",
    "Inbox",
    "NotReadyError",
    "clear_state",
    "closing_time",
    "decode_json",
    "peel_pool",
    "publish_progress",
    "publish_state",
    "retained_status",
]

READY_STATES = frozenset({"ready", "working"})
"""States in which a stage listens on its ingress (``done``, ``refused`` and ``failed`` mean it
stopped listening: nothing must be sent to it any more)."""


class NotReadyError(OperationalError):
    """A downstream stage did not announce ``ready`` in time."""


def decode_json(payload: bytes) -> dict[str, Any] | None:
    """The JSON object in ``payload``, or None if it is not one (never raises)."""
    try:
        value = json.loads(payload.decode())
    except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: '[[[[...'
        return None
    return value if isinstance(value, dict) else None


async def publish_state(
    transport: Transport, prefix: str, round_id: int, stage: str, state: str, **fields: Any
) -> None:
    """Publish ``{"stage", "state", "time", **fields}`` as the stage's status, retained unless
    the stage is a client process (:func:`~shuffledp.protocol.topics.retains_status`)."""
    body = {"stage": stage, "state": state, "time": time.time(), **fields}
    await transport.publish(
        status_topic(prefix, round_id, stage),
        json.dumps(body).encode(),
        retain=retains_status(stage),
    )


async def clear_state(transport: Transport, prefix: str, round_id: int, stage: str) -> None:
    """Delete the stage's retained status (an empty retained payload; for a client process,
    whose status is not retained, an empty message that tells the listeners it ended)."""
    await transport.publish(
        status_topic(prefix, round_id, stage), b"", retain=retains_status(stage)
    )


async def publish_progress(
    transport: Transport, prefix: str, round_id: int, stage: str, **counts: Any
) -> None:
    """Publish ``{"stage", "time", **counts}`` on the stage's progress topic (not retained)."""
    body = {"stage": stage, "time": time.time(), **counts}
    await transport.publish(progress_topic(prefix, round_id, stage), json.dumps(body).encode())


def closing_time(
    *, stage_index: int, ready_at: float, first_arrival: float | None, deadline: float
) -> float:
    """When stage ``stage_index`` (0 = hop 0, ..., H = the analyzer) stops collecting if its
    batch is not complete by then (monotonic seconds).

    Hop 0 collects client messages: ``deadline`` seconds after it became ready. A later stage
    waits for its upstream's batch, which comes only after the upstream closed: ``deadline``
    seconds after the first frame of that batch arrived (frames follow each other within
    moments; the deadline only matters if some are lost), and, if no frame ever comes (the
    upstream died), ``(stage_index + 1) * deadline`` after it became ready, by which time every
    upstream stage has passed its own.
    """
    if stage_index == 0:
        return ready_at + deadline
    if first_arrival is not None:
        return first_arrival + deadline
    return ready_at + (stage_index + 1) * deadline


@contextlib.asynccontextmanager
async def retained_status(
    transport: Transport, prefix: str, round_id: int, stage: str
) -> AsyncIterator[None]:
    """Clear the stage's retained status when the block ends, however it ends: a stale
    ``ready`` left on the broker would make a later upstream of the same prefix and round publish
    before anyone listens. (A process that dies without running this is covered by its MQTT
    will, which clears the same topic: see MqttTransport's ``will_topic``.)"""
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            await clear_state(transport, prefix, round_id, stage)


PEEL_THREADS = max(1, min(4, os.cpu_count() or 1))
"""Threads that open sealed boxes in parallel (libsodium releases the GIL while it works)."""


@contextlib.asynccontextmanager
async def peel_pool(stage: str) -> AsyncIterator[Mapper]:
    """A Mapper running decryptions on PEEL_THREADS threads, shut down on exit."""
    with ThreadPoolExecutor(PEEL_THREADS, thread_name_prefix=f"{stage}-peel") as pool:
        yield parallel_mapper(pool, PEEL_THREADS)


async def _cancel_and_wait(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


class Inbox:
    """The transport's received messages, in order, with timeouts (module docstring).

    Use as ``async with Inbox(transport) as inbox:``; ``await inbox.get(timeout)`` returns the
    next message, or None if none came within ``timeout`` seconds. If the transport fails
    (connection lost), ``get`` raises its error. ``group``: start the pump as a task of this
    TaskGroup (a :class:`~shuffledp.protocol.stage.Stage` does) rather than a free task.
    """

    def __init__(
        self, transport: Transport, *, name: str = "inbox", group: asyncio.TaskGroup | None = None
    ) -> None:
        self._transport = transport
        self._group = group
        self._queue: asyncio.Queue[Message | BaseException] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._name = name
        self._failure: BaseException | None = None

    async def __aenter__(self) -> Inbox:
        spawn = asyncio.create_task if self._group is None else self._group.create_task
        self._task = spawn(self._pump(), name=self._name)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._task is not None:
            # The pump's own cancellation ends here; one of this task (Ctrl-C while the pump
            # stops) is raised again, not swallowed with it.
            await keep_cancellation(_cancel_and_wait(self._task))

    async def _pump(self) -> None:
        messages: AsyncIterator[Message] = self._transport.messages()
        try:
            async for message in messages:
                self._queue.put_nowait(message)
        except Exception as exc:  # handed to the reader, which raises it
            self._queue.put_nowait(exc)

    async def get(self, timeout: float | None) -> Message | None:
        if self._failure is not None:
            raise self._failure
        try:
            item = self._queue.get_nowait()  # fast path: no timer, no task
        except asyncio.QueueEmpty:
            try:
                if timeout is None:
                    item = await self._queue.get()
                else:
                    # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the result
                    # and drops a cancellation that arrives in the same step (a Ctrl-C was lost
                    # while messages streamed in); asyncio.timeout re-raises it.
                    async with asyncio.timeout(max(timeout, 0.0)):
                        item = await self._queue.get()
            except TimeoutError:
                return None
        if isinstance(item, BaseException):
            self._failure = item
            raise item
        return item

    def drain(self, limit: int) -> list[Message]:
        """Up to ``limit`` messages that have already arrived, without waiting (a failure of
        the transport is kept for the next ``get``)."""
        out: list[Message] = []
        while len(out) < limit:
            try:
                item = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            if isinstance(item, BaseException):
                self._failure = item
                break
            out.append(item)
        return out
