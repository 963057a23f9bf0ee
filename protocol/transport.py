"""How stages exchange messages: the transport interface and its in-memory implementation.

Clients, hops and the analyzer only need three operations from a publish/subscribe system, so
that is the whole interface (:class:`Transport`):

- ``await publish(topic, payload, retain=False)``: deliver ``payload`` to every current
  subscriber of ``topic``, at least once (MQTT QoS 1); ``retain=True`` also keeps it for later
  subscribers (an empty retained payload deletes the kept one, as in MQTT);
- ``await subscribe(topic_filter)``: from now on, receive messages whose topic matches the filter
  (MQTT syntax: ``+`` one level, ``#`` the rest), and the retained ones that match;
- ``async for message in messages()``: every received message, in arrival order, as
  :class:`Message`.

A transport may also say when the broker did not keep its session across a reconnect
(:class:`SessionReporting`, ``sessions_lost``; read it with :func:`sessions_lost`): whatever the
broker held for it is gone, and the stages repair that end to end (protocol/receipts.py).

A transport may also take acknowledgements (:class:`AcknowledgingTransport`, ``ack(message)``):
over MQTT with manual acknowledgement the broker redelivers a QoS 1 message, after a crash and a
reconnect with the same persistent session, until it is acknowledged, so a stage that must not
lose what it received acknowledges only once that is on disk (the journal of a hop or of the
analyzer; :func:`require_journaling` checks that a connection can do that).

:class:`MemoryBroker` / :class:`MemoryTransport` implement it inside one event loop, for unit
tests (:class:`LossyMemoryBroker` drops a seeded share of deliveries, as a broker with a slow
subscriber does); :mod:`shuffledp.protocol.mqtt` implements it over a real MQTT broker with aiomqtt.
:func:`publish_all` keeps a bounded number of publishes in flight, which is what makes MQTT
clients fast (docs/transport.md: about 100 us of client CPU per publish, mostly waiting).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from shuffledp.errors import InvalidParameterError
from shuffledp.validation import require_int

__all__ = [
    "AcknowledgingTransport",
    "LossyMemoryBroker",
    "MemoryBroker",
    "MemoryTransport",
    "Message",
    "SessionReporting",
    "Transport",
    "connection_epoch",
    "publish_all",
    "require_journaling",
    "sessions_lost",
    "topic_matches",
]


@dataclass(frozen=True, slots=True)
class Message:
    """One received message: its topic and its payload bytes.

    ``ack_id``: what the transport needs to acknowledge it (the MQTT packet id of a QoS 1
    delivery on a manually acknowledging connection), None when nothing is to be acknowledged;
    ``epoch``: the transport's connection epoch (:func:`connection_epoch`) when it was
    received, so that a stage can tell what it received before a connection was lost; neither
    is part of the message's identity (equality ignores them).
    """

    topic: str
    payload: bytes
    ack_id: int | None = field(default=None, compare=False)
    epoch: int = field(default=0, compare=False)


class Transport(Protocol):
    """Publish/subscribe as the pipeline uses it (module docstring)."""

    async def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> None: ...

    async def subscribe(self, topic_filter: str) -> None: ...

    def messages(self) -> AsyncIterator[Message]: ...


@runtime_checkable
class AcknowledgingTransport(Transport, Protocol):
    """A transport that takes acknowledgements: ``ack(message)`` tells the broker it may forget
    ``message`` (a no-op for a message with ``ack_id`` None, or on a connection that acknowledges
    by itself)."""

    def ack(self, message: Message) -> None: ...


@runtime_checkable
class SessionReporting(Protocol):
    """A transport that counts the reconnections after which the broker had not kept its
    session (MQTT CONNACK with session present = 0 on a connection that asked for a persistent
    one): its subscriptions and the messages queued for it are gone. A stage that sees
    ``sessions_lost`` grow treats it as a loss to repair: a client process claims again and
    resends what hop 0 has not accepted, hop 0 sends every client process a receipt (so each
    resends what it is missing)."""

    @property
    def sessions_lost(self) -> int: ...


def sessions_lost(transport: Transport) -> int:
    """``transport.sessions_lost``, or 0 for a transport that does not report lost sessions."""
    return transport.sessions_lost if isinstance(transport, SessionReporting) else 0


def connection_epoch(transport: Transport) -> int:
    """``transport.epoch``: how many times its connection was re-established (an MQTT
    reconnection, the in-memory transport's lost session), or 0 for a transport that does not
    say. What was retained before a new epoch may be gone from the broker (a broker that crashed
    restarts without it): a stage trusts a downstream's ``ready`` only if it was received in the
    current epoch (:class:`~shuffledp.protocol.stage.Readiness`)."""
    epoch = getattr(transport, "epoch", 0)
    return epoch if isinstance(epoch, int) else 0


def require_journaling(transport: Transport) -> AcknowledgingTransport:
    """``transport`` if a stage with a journal (``state_dir``) can use it: it takes
    acknowledgements, acknowledges only when told to (``manual_ack``) and keeps its session
    across a reconnect (``persistent_session``); a transport without these attributes (the
    in-memory one) is taken as having them. InvalidParameterError otherwise: an automatic
    PUBACK, or a session the broker drops with the connection, would lose what was delivered
    but not yet journaled."""
    if not isinstance(transport, AcknowledgingTransport):
        raise InvalidParameterError(
            f"state_dir needs a transport that takes acknowledgements (ack), got "
            f"{type(transport).__name__}"
        )
    manual_ack = getattr(transport, "manual_ack", True)
    persistent_session = getattr(transport, "persistent_session", True)
    if not manual_ack or not persistent_session:
        raise InvalidParameterError(
            "state_dir needs a connection with manual acknowledgement and a persistent "
            "session (MqttTransport(manual_ack=True, persistent_session=True)), got "
            f"manual_ack={manual_ack}, persistent_session={persistent_session}"
        )
    return transport


async def publish_all(
    transport: Transport, items: Iterable[tuple[str, bytes]], *, max_in_flight: int = 64
) -> int:
    """Publish every (topic, payload) of ``items`` with at most ``max_in_flight`` publishes
    awaiting their acknowledgement at once; returns how many were published.

    Items are taken from the iterable lazily (a generator of a million messages is never
    materialised as tasks). If one publish fails, the others are cancelled and the error is
    raised (in an ExceptionGroup, from the TaskGroup).
    """
    require_int("max_in_flight", max_in_flight, 1)
    slots = asyncio.Semaphore(max_in_flight)
    count = 0

    async def send(topic: str, payload: bytes) -> None:
        try:
            await transport.publish(topic, payload)
        finally:
            slots.release()

    async with asyncio.TaskGroup() as group:
        for topic, payload in items:
            await slots.acquire()
            group.create_task(send(topic, payload), name=f"publish:{topic}")
            count += 1
    return count


def topic_matches(topic_filter: str, topic: str) -> bool:
    """True iff ``topic`` matches the MQTT ``topic_filter`` ('+' one level, '#' the rest, and
    the parent level itself: 'a/#' matches 'a'; wildcards first never match '$...' topics)."""
    if topic.startswith("$") and topic_filter[:1] in ("#", "+"):
        return False  # MQTT 4.7.2: a filter starting with a wildcard never matches a $ topic
    filter_levels = topic_filter.split("/")
    topic_levels = topic.split("/")
    for index, level in enumerate(filter_levels):
        if level == "#":
            return True
        if index >= len(topic_levels):
            return False
        if level not in ("+", topic_levels[index]):
            return False
    return len(filter_levels) == len(topic_levels)


class MemoryBroker:
    """An in-process broker for tests: topic filters, retained messages, exactly-once delivery
    in publish order (a stricter service than MQTT QoS 1, which may duplicate)."""

    def __init__(self) -> None:
        self._transports: list[MemoryTransport] = []
        self._retained: dict[str, bytes] = {}
        self.published = 0

    def connect(self) -> MemoryTransport:
        """A new client of this broker."""
        transport = MemoryTransport(self)
        self._transports.append(transport)
        return transport

    def _publish(self, topic: str, payload: bytes, retain: bool) -> None:
        self.published += 1
        if retain:
            if payload:
                self._retained[topic] = payload
            else:
                self._retained.pop(topic, None)
        for transport in self._transports:
            transport._deliver(topic, payload)

    def _retained_for(self, topic_filter: str) -> list[Message]:
        return [
            Message(topic, payload)
            for topic, payload in self._retained.items()
            if topic_matches(topic_filter, topic)
        ]


class MemoryTransport:
    """A client of a :class:`MemoryBroker` (get one with ``broker.connect()``)."""

    def __init__(self, broker: MemoryBroker) -> None:
        self._broker = broker
        self._filters: list[str] = []
        self._queue: asyncio.Queue[Message] = asyncio.Queue()
        self.sessions_lost = 0

    def lose_session(self) -> int:
        """Tests: act as a reconnection to a broker that kept no session: the messages
        received but not yet read are gone and ``sessions_lost`` grows (the subscriptions are
        kept, as a transport subscribes again after a reconnect). Returns how many were lost."""
        lost = self._queue.qsize()
        self._queue = asyncio.Queue()
        self.sessions_lost += 1
        return lost

    @property
    def epoch(self) -> int:
        """The connection epoch (:func:`connection_epoch`): the sessions lost so far."""
        return self.sessions_lost

    async def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> None:
        if not isinstance(payload, bytes | bytearray):
            raise TypeError(f"payload must be bytes, got {type(payload).__name__}")
        self._broker._publish(topic, bytes(payload), retain)
        await asyncio.sleep(0)  # let subscribers run, as a network round trip would

    async def subscribe(self, topic_filter: str) -> None:
        self._filters.append(topic_filter)
        for message in self._broker._retained_for(topic_filter):
            self._queue.put_nowait(Message(message.topic, message.payload, epoch=self.epoch))

    async def messages(self) -> AsyncIterator[Message]:
        while True:
            yield await self._queue.get()

    def ack(self, message: Message) -> None:
        """Nothing to do: the in-memory broker delivers exactly once and never redelivers."""

    def _deliver(self, topic: str, payload: bytes) -> None:
        if any(topic_matches(f, topic) for f in self._filters):
            self._queue.put_nowait(Message(topic, payload, epoch=self.epoch))

    def _subscribed(self, topic: str) -> bool:
        return any(topic_matches(f, topic) for f in self._filters)


class LossyMemoryBroker(MemoryBroker):
    """A :class:`MemoryBroker` that acknowledges every publish but drops each delivery of a
    non-retained message whose topic matches one of ``drop_topics`` with probability ``rate``,
    drawn from ``random.Random(seed)`` (seeded: a test sees the same drops every run). That is
    what an MQTT broker does to a slow subscriber past its queue limit. Retained messages (the
    stages' statuses) are never dropped. ``dropped`` counts the deliveries dropped."""

    def __init__(self, *, rate: float, seed: int, drop_topics: tuple[str, ...] = ("#",)) -> None:
        super().__init__()
        if not 0.0 <= rate < 1.0:
            raise InvalidParameterError(f"drop rate must be in [0, 1), got {rate!r}")
        self.rate = rate
        self.drop_topics = drop_topics
        self.dropped = 0
        self._random = random.Random(seed)

    def _publish(self, topic: str, payload: bytes, retain: bool) -> None:
        if retain or not any(topic_matches(f, topic) for f in self.drop_topics):
            super()._publish(topic, payload, retain)
            return
        self.published += 1
        for transport in self._transports:
            if not transport._subscribed(topic):
                continue
            if self._random.random() < self.rate:
                self.dropped += 1
                continue
            transport._deliver(topic, payload)
