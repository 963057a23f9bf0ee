"""What every transport must do: one contract class, run over the in-memory transport, the
embedded amqtt broker and Mosquitto.

The stages use only the interface of protocol/transport.py (publish, subscribe, messages), so
each of its promises is checked here on every implementation, as the pipeline relies on it:

- delivery: every message published to a subscribed topic arrives, once, with its topic and
  its payload byte for byte (at least once is MQTT QoS 1's promise; on a healthy connection no
  broker here repeats a message, and a repeat would show as a rejected duplicate in a round);
- order: messages one connection publishes to one topic, each awaited, arrive in publish order
  (MQTT 3.1.1 section 4.6, ordered topics), so a stage's last status is the one that stays;
- the handshake that makes start order irrelevant (protocol/runtime.py): a subscription is in
  force once ``subscribe`` returns, so a publisher that saw the subscriber's retained ``ready``
  loses nothing;
- topic isolation: a subscriber gets what its filter matches (``+`` one level, ``#`` the rest),
  nothing else; a connection that subscribed to nothing gets nothing;
- retained messages: the last one on a topic reaches later subscribers, an empty one deletes it;
- size: a payload just under the largest packet shuffledp's Mosquitto accepts (MAX_PACKET_BYTES,
  16x the pipeline's batches) passes intact;
- clean close: leaving a connection's block does not fire its will (the retained status stays),
  does not disturb the other connections, and frees its client id for a new connection.

The in-memory transport has no connection to close and no will; its ``connect`` block only
scopes the transport, so the close checks hold for it trivially (what they check there: the
retained status and the other clients are unaffected).
"""

from __future__ import annotations

import collections
import contextlib
import os
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

import pytest

from shuffledp.protocol.mqtt import MqttTransport
from shuffledp.protocol.runtime import Inbox
from shuffledp.protocol.transport import MemoryBroker, Message, Transport, publish_all
from shuffledp.security.access import MAX_PACKET_BYTES

#: Seconds any expected message may take; a missing message fails the test after this long.
ARRIVAL = 30.0
#: Seconds of silence after the expected messages during which nothing else may arrive.
QUIET = 0.5
#: Room for the MQTT fixed and variable headers (topic, packet id) under MAX_PACKET_BYTES.
HEADER_ROOM = 1024


@dataclass(frozen=True)
class Client:
    """A connection and the Inbox that reads it, as a stage reads its transport."""

    transport: Transport
    inbox: Inbox

    async def receive(self, count: int) -> list[Message]:
        """The next ``count`` messages (failing if they take more than ARRIVAL seconds), then
        whatever else arrives within QUIET seconds (a test expecting exactly ``count`` sees it)."""
        received: list[Message] = []
        give_up = time.monotonic() + ARRIVAL
        while len(received) < count:
            message = await self.inbox.get(give_up - time.monotonic())
            assert message is not None, f"{len(received)} of {count} messages within {ARRIVAL} s"
            received.append(message)
        while (extra := await self.inbox.get(QUIET)) is not None:
            received.append(extra)
        return received


class Network(Protocol):
    """Where a test's connections come from (one broker per test)."""

    def connect(
        self, client_id: str, *, will_topic: str | None = None
    ) -> contextlib.AbstractAsyncContextManager[Client]: ...


class MemoryNetwork:
    """The in-memory broker (protocol/transport.py): ``connect`` scopes a new client."""

    def __init__(self) -> None:
        self.broker = MemoryBroker()

    @contextlib.asynccontextmanager
    async def connect(
        self, client_id: str, *, will_topic: str | None = None
    ) -> AsyncIterator[Client]:
        transport = self.broker.connect()
        async with Inbox(transport) as inbox:
            yield Client(transport, inbox)


class MqttNetwork:
    """A broker at ``url``: ``connect`` opens an MqttTransport (QoS 1, clean session)."""

    def __init__(self, url: str) -> None:
        self.url = url

    @contextlib.asynccontextmanager
    async def connect(
        self, client_id: str, *, will_topic: str | None = None
    ) -> AsyncIterator[Client]:
        async with (
            MqttTransport(self.url, client_id=client_id, will_topic=will_topic) as transport,
            Inbox(transport) as inbox,
        ):
            yield Client(transport, inbox)


@pytest.fixture(params=["memory", "embedded", "mosquitto"])
def network(request: pytest.FixtureRequest) -> Network:
    """Each contract test runs once per transport (the brokers' fixtures: tests/conftest.py)."""
    if request.param == "memory":
        return MemoryNetwork()
    fixture = {"embedded": "embedded_broker_url", "mosquitto": "mosquitto_url"}[request.param]
    url: str = request.getfixturevalue(fixture)
    return MqttNetwork(url)


@pytest.fixture
def prefix() -> str:
    """A topic prefix of the test's own (the CI's Mosquitto is shared by every test)."""
    return f"contract-{uuid.uuid4().hex[:12]}"


def payloads(count: int) -> list[bytes]:
    """Distinct payloads of varied lengths and every byte value, the empty one included."""
    every_byte = bytes(range(256))
    return [b""] + [
        f"{i:06d}".encode() + every_byte[: i % 257] + os.urandom(i % 7) for i in range(1, count)
    ]


@pytest.mark.asyncio
class TestTransportContract:
    async def test_every_message_arrives_once_exactly_as_sent(
        self, network: Network, prefix: str
    ) -> None:
        topic = f"{prefix}/round/1/hop/0"
        sent = payloads(500)
        async with (
            network.connect(f"{prefix}-sub") as subscriber,
            network.connect(f"{prefix}-pub") as publisher,
        ):
            await subscriber.transport.subscribe(topic)
            assert await publish_all(publisher.transport, ((topic, p) for p in sent)) == len(sent)
            received = await subscriber.receive(len(sent))
        assert {m.topic for m in received} == {topic}
        got = collections.Counter(m.payload for m in received)
        assert got == collections.Counter(sent)  # nothing lost, repeated, or altered

    async def test_one_publishers_messages_on_a_topic_arrive_in_publish_order(
        self, network: Network, prefix: str
    ) -> None:
        status, progress = f"{prefix}/round/1/status/hop-0", f"{prefix}/round/1/progress/hop-0"
        sent = [f"{i}".encode() for i in range(200)]
        async with (
            network.connect(f"{prefix}-sub") as subscriber,
            network.connect(f"{prefix}-pub") as publisher,
        ):
            await subscriber.transport.subscribe(f"{prefix}/round/1/#")
            for payload in sent:  # two interleaved topics, each publish awaited
                await publisher.transport.publish(status, payload)
                await publisher.transport.publish(progress, payload)
            received = await subscriber.receive(2 * len(sent))
        for topic in (status, progress):
            assert [m.payload for m in received if m.topic == topic] == sent

    async def test_a_publisher_that_saw_ready_reaches_the_subscriber(
        self, network: Network, prefix: str
    ) -> None:
        """The start-order handshake of protocol/runtime.py, downstream first: subscribe to the
        ingress, announce ``ready`` (retained); the upstream, started later, waits for it and
        only then publishes. Every message must arrive."""
        ingress, status = f"{prefix}/round/1/hop/1", f"{prefix}/round/1/status/hop-1"
        sent = payloads(100)
        async with network.connect(f"{prefix}-down") as downstream:
            await downstream.transport.subscribe(ingress)
            await downstream.transport.publish(status, b"ready", retain=True)
            async with network.connect(f"{prefix}-up") as upstream:
                await upstream.transport.subscribe(status)
                [seen] = await upstream.receive(1)
                assert (seen.topic, seen.payload) == (status, b"ready")
                for payload in sent:
                    await upstream.transport.publish(ingress, payload)
            received = await downstream.receive(len(sent))
        assert [m.payload for m in received] == sent

    async def test_each_subscriber_gets_what_its_filter_matches_and_nothing_else(
        self, network: Network, prefix: str
    ) -> None:
        topics = [
            f"{prefix}/a",
            f"{prefix}/b",
            f"{prefix}/a/deeper",
            f"{prefix}/ab",
            f"{prefix}-other/a",
            prefix,
        ]
        filters = {
            "exact": f"{prefix}/a",
            "plus": f"{prefix}/+",
            "hash": f"{prefix}/#",
            "none": None,
        }
        expected = {
            "exact": [f"{prefix}/a"],
            "plus": [f"{prefix}/a", f"{prefix}/b", f"{prefix}/ab"],
            "hash": [f"{prefix}/a", f"{prefix}/b", f"{prefix}/a/deeper", f"{prefix}/ab", prefix],
            "none": [],
        }
        async with contextlib.AsyncExitStack() as stack:
            clients = {
                name: await stack.enter_async_context(network.connect(f"{prefix}-{name}"))
                for name in filters
            }
            for name, topic_filter in filters.items():
                if topic_filter is not None:
                    await clients[name].transport.subscribe(topic_filter)
            publisher = await stack.enter_async_context(network.connect(f"{prefix}-pub"))
            for topic in topics:
                await publisher.transport.publish(topic, topic.encode())
            for name, want in expected.items():
                got = await clients[name].receive(len(want))
                assert sorted(m.topic for m in got) == sorted(want), name
                assert all(m.payload == m.topic.encode() for m in got), name

    async def test_the_last_retained_message_reaches_later_subscribers_and_empty_deletes_it(
        self, network: Network, prefix: str
    ) -> None:
        kept, deleted, never = (f"{prefix}/status/{name}" for name in ("kept", "gone", "never"))
        async with network.connect(f"{prefix}-pub") as publisher:
            await publisher.transport.publish(kept, b"ready", retain=True)
            await publisher.transport.publish(kept, b"done", retain=True)
            await publisher.transport.publish(deleted, b"ready", retain=True)
            await publisher.transport.publish(deleted, b"", retain=True)
            await publisher.transport.publish(never, b"not retained")
            async with network.connect(f"{prefix}-late") as late:
                await late.transport.subscribe(f"{prefix}/status/+")
                received = await late.receive(1)
            await publisher.transport.publish(kept, b"", retain=True)  # leave the broker clean
        assert [(m.topic, m.payload) for m in received] == [(kept, b"done")]

    async def test_a_payload_just_under_the_packet_limit_arrives_intact(
        self, network: Network, prefix: str
    ) -> None:
        topic = f"{prefix}/round/1/analyzer"
        payload = os.urandom(MAX_PACKET_BYTES - HEADER_ROOM)
        async with (
            network.connect(f"{prefix}-sub") as subscriber,
            network.connect(f"{prefix}-pub") as publisher,
        ):
            await subscriber.transport.subscribe(topic)
            await publisher.transport.publish(topic, payload)
            await publisher.transport.publish(topic, b"after")
            received = await subscriber.receive(2)
        assert [len(m.payload) for m in received] == [len(payload), len(b"after")]
        assert [m.payload for m in received] == [payload, b"after"]

    async def test_a_clean_close_keeps_the_status_frees_the_id_and_spares_the_others(
        self, network: Network, prefix: str
    ) -> None:
        status = f"{prefix}/round/1/status/hop-0"
        topic = f"{prefix}/round/1/hop/1"
        async with (
            network.connect(f"{prefix}-watch") as watcher,
            network.connect(f"{prefix}-other") as other,
        ):
            await watcher.transport.subscribe(topic)
            for _ in range(2):  # the same client id twice: the first close freed it
                async with network.connect(f"{prefix}-hop-0", will_topic=status) as stage:
                    await stage.transport.publish(status, b"done", retain=True)
                    await stage.transport.publish(topic, b"from the stage")
                [got] = await watcher.receive(1)
                assert got.payload == b"from the stage"
            await other.transport.publish(topic, b"after the close")
            [after] = await watcher.receive(1)
            assert after.payload == b"after the close"
            async with network.connect(f"{prefix}-late") as late:
                await late.transport.subscribe(status)
                [kept] = await late.receive(1)
            assert (kept.topic, kept.payload) == (status, b"done")  # no will fired
            await other.transport.publish(status, b"", retain=True)  # leave the broker clean
