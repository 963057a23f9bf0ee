"""FanInTransport (protocol/fanin.py): hop 0 over several brokers, on in-memory brokers.

Invariants: what either broker delivers arrives once; a publish reaches every broker except on
a primary-only topic; an acknowledgement reaches the member the message came from with that
member's own id; the epoch is the primary's; lost sessions add up; a member's failure is raised.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.fanin import FanInTransport
from shuffledp.protocol.transport import MemoryBroker, MemoryTransport, Message


class Member:
    """A MemoryTransport as a connection (async context manager) that records its acks and
    hands out ack ids (as a manually acknowledging MQTT connection does)."""

    def __init__(self, broker: MemoryBroker, *, fail: Exception | None = None) -> None:
        self.inner: MemoryTransport = broker.connect()
        self.acked: list[int | None] = []
        self.entered = self.left = 0
        self.fail = fail
        self._next_id = 100

    async def __aenter__(self) -> Member:
        self.entered += 1
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.left += 1

    async def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> None:
        await self.inner.publish(topic, payload, retain=retain)

    async def subscribe(self, topic_filter: str) -> None:
        await self.inner.subscribe(topic_filter)

    async def messages(self) -> AsyncIterator[Message]:
        if self.fail is not None:
            raise self.fail
        async for message in self.inner.messages():
            self._next_id += 1
            yield Message(message.topic, message.payload, self._next_id, message.epoch)

    def ack(self, message: Message) -> None:
        self.acked.append(message.ack_id)

    @property
    def epoch(self) -> int:
        return self.inner.epoch

    @property
    def sessions_lost(self) -> int:
        return self.inner.sessions_lost


async def _take(transport: FanInTransport, count: int) -> list[Message]:
    got: list[Message] = []
    async with asyncio.timeout(5):
        async for message in transport.messages():
            got.append(message)
            if len(got) == count:
                break
    return got


@pytest.mark.asyncio
async def test_reports_from_every_broker_arrive_once_and_are_acked_where_they_came_from() -> None:
    brokers = [MemoryBroker(), MemoryBroker()]
    members = [Member(broker) for broker in brokers]
    async with FanInTransport(members, primary_only=("out",)) as fan:
        await fan.subscribe("in/#")
        senders = [broker.connect() for broker in brokers]
        await senders[0].publish("in/a", b"a")
        await senders[1].publish("in/b", b"b")
        got = await _take(fan, 2)
        assert sorted(m.payload for m in got) == [b"a", b"b"]
        for message in got:
            fan.ack(message)
    assert members[0].acked == [101] and members[1].acked == [101]  # each member's own id
    assert [(m.entered, m.left) for m in members] == [(1, 1), (1, 1)]


@pytest.mark.asyncio
async def test_publishes_reach_every_broker_but_the_output_only_the_first() -> None:
    brokers = [MemoryBroker(), MemoryBroker(), MemoryBroker()]
    listeners = [broker.connect() for broker in brokers]
    for listener in listeners:
        await listener.subscribe("#")
    async with FanInTransport([Member(b) for b in brokers], primary_only=("out",)) as fan:
        await fan.publish("status/hop-0", b"ready", retain=True)
        await fan.publish("out", b"frame")
    assert [broker.published for broker in brokers] == [2, 1, 1]
    for index, listener in enumerate(listeners):
        topics = []
        while not listener._queue.empty():
            topics.append(listener._queue.get_nowait().topic)
        assert topics == (["status/hop-0", "out"] if index == 0 else ["status/hop-0"])


@pytest.mark.asyncio
async def test_the_epoch_is_the_primarys_and_lost_sessions_add_up() -> None:
    brokers = [MemoryBroker(), MemoryBroker()]
    members = [Member(broker) for broker in brokers]
    async with FanInTransport(members) as fan:
        await fan.subscribe("t")
        members[1].inner.lose_session()
        members[1].inner.lose_session()
        assert (fan.epoch, fan.sessions_lost) == (0, 2)
        members[0].inner.lose_session()
        assert (fan.epoch, fan.sessions_lost) == (1, 3)
        await brokers[1].connect().publish("t", b"x")
        (message,) = await _take(fan, 1)
        assert message.epoch == 1  # the primary's, not the secondary's 2


@pytest.mark.asyncio
async def test_a_members_failure_is_raised_to_the_reader() -> None:
    failing = Member(MemoryBroker(), fail=ConnectionError("broker B lost"))
    async with FanInTransport([Member(MemoryBroker()), failing]) as fan:
        with pytest.raises(ConnectionError, match="broker B lost"):
            await _take(fan, 1)


def test_one_broker_is_not_a_fan_in() -> None:
    with pytest.raises(InvalidParameterError, match="at least 2 brokers, got 1"):
        FanInTransport([Member(MemoryBroker())])
