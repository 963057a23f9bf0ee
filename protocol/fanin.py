"""Hop 0 on several brokers: one :class:`~shuffledp.protocol.transport.Transport` over many.

Past the ceiling of one broker (a single Mosquitto is single-threaded: bench/broker_ceiling.py),
a deployment runs B brokers, each carrying a slice of the client processes (process j on broker
j mod B), and hop 0 takes its reports from all of them, while the later stages and the analyzer
stay on the first broker (the *primary*). :class:`FanInTransport` is that hop 0's connection:

- ``subscribe(filter)`` subscribes on every broker (the reports, the client processes' claims,
  the downstream's status), and ``messages()`` yields what any of them delivers, in the order
  it arrives;
- ``publish(topic, ...)`` publishes on every broker (the stage's status, progress and the
  receipts: each client process waits for them on its own broker), except on the topics given
  as ``primary_only`` (hop 0's output, which only the next stage on the primary reads; elsewhere
  it would be dropped for want of a subscriber, after costing those brokers a copy);
- ``ack(message)`` acknowledges on the broker the message came from (its ``ack_id`` carries the
  broker's index), ``sessions_lost`` is the sum over the brokers (a session lost on any is a
  loss to repair), and ``epoch`` is the primary's: the downstream's ``ready``, the only status
  whose epoch counts (protocol/stage.py), arrives there. A message from another broker carries
  the primary's epoch at its arrival.

Every member is a connection of its own (e.g. :class:`~shuffledp.protocol.mqtt.MqttTransport`),
with its own will, session and lock; entering the block enters them all, in order, and leaving
it leaves them all, also when one failed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection, Sequence
from types import TracebackType
from typing import Any, Protocol, Self

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.transport import (
    AcknowledgingTransport,
    Message,
    Transport,
    connection_epoch,
    sessions_lost,
)

__all__ = ["FanInTransport", "MemberTransport"]


class MemberTransport(Transport, Protocol):
    """A transport that is also an async context manager (a connection opened on entry)."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> Any: ...


class FanInTransport:
    """One transport over ``members`` (the first is the primary; module docstring)."""

    def __init__(
        self, members: Sequence[MemberTransport], *, primary_only: Collection[str] = ()
    ) -> None:
        if len(members) < 2:
            raise InvalidParameterError(
                f"a fan-in transport needs at least 2 brokers, got {len(members)}"
            )
        self._members = tuple(members)
        self._primary_only = frozenset(primary_only)
        self._stack = contextlib.AsyncExitStack()

    @property
    def members(self) -> tuple[MemberTransport, ...]:
        return self._members

    async def __aenter__(self) -> Self:
        async with contextlib.AsyncExitStack() as stack:
            for member in self._members:
                await stack.enter_async_context(member)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._stack.__aexit__(exc_type, exc, traceback)

    async def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> None:
        if topic in self._primary_only:
            await self._members[0].publish(topic, payload, retain=retain)
            return
        # gather, not a TaskGroup: a failure is raised as itself (MqttConnectionError, one
        # line), not wrapped in an ExceptionGroup
        await asyncio.gather(*(m.publish(topic, payload, retain=retain) for m in self._members))

    async def subscribe(self, topic_filter: str) -> None:
        for member in self._members:
            await member.subscribe(topic_filter)

    async def messages(self) -> AsyncIterator[Message]:
        """What every member delivers, as it arrives; a member's failure is raised here."""
        arrived: asyncio.Queue[Message | BaseException] = asyncio.Queue()
        pumps = [
            asyncio.create_task(self._pump(index, arrived), name=f"fan-in-{index}")
            for index in range(len(self._members))
        ]
        try:
            while True:
                item = await arrived.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)

    async def _pump(self, index: int, into: asyncio.Queue[Message | BaseException]) -> None:
        """Put member ``index``'s messages into ``into``, re-tagged (:meth:`_tag`)."""
        try:
            async for message in self._members[index].messages():
                into.put_nowait(self._tag(index, message))
        except Exception as exc:  # handed to the reader, which raises it
            into.put_nowait(exc)

    def _tag(self, index: int, message: Message) -> Message:
        """``message`` with an ``ack_id`` that also names member ``index``, and the primary's
        epoch unless it came from the primary."""
        ack_id = None if message.ack_id is None else message.ack_id * len(self._members) + index
        epoch = message.epoch if index == 0 else self.epoch
        return Message(message.topic, message.payload, ack_id, epoch)

    def ack(self, message: Message) -> None:
        """Acknowledge ``message`` on the broker it came from."""
        if message.ack_id is None:
            return
        own_id, index = divmod(message.ack_id, len(self._members))
        member = self._members[index]
        if isinstance(member, AcknowledgingTransport):
            member.ack(Message(message.topic, message.payload, own_id, message.epoch))

    @property
    def epoch(self) -> int:
        return connection_epoch(self._members[0])

    @property
    def sessions_lost(self) -> int:
        return sum(sessions_lost(member) for member in self._members)
