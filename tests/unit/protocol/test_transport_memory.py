"""The transport layer without a network: topic_matches (MQTT topic filters), MemoryBroker /
MemoryTransport (delivery, retained messages), publish_all (bounded concurrency) and Inbox
(timeouts).

MQTT rules checked against the specification (MQTT 3.1.1 section 4.7 / MQTT 5 section 4.7):
'#' matches the rest of the topic *including the parent level* ("sport/#" matches "sport"),
'+' matches exactly one level (possibly empty), and filters starting with a wildcard do not
match topics starting with '$' (4.7.2).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.runtime import Inbox, decode_json
from shuffledp.protocol.transport import (
    LossyMemoryBroker,
    MemoryBroker,
    MemoryTransport,
    Message,
    publish_all,
    sessions_lost,
    topic_matches,
)

# --- topic_matches ----------------------------------------------------------------------------

TOPIC_TABLE: list[tuple[str, str, bool]] = [
    # exact
    ("a/b/c", "a/b/c", True),
    ("a/b/c", "a/b/d", False),
    ("a/b", "a/b/c", False),  # level count mismatch, filter shorter
    ("a/b/c", "a/b", False),  # level count mismatch, filter longer
    ("a", "A", False),  # case-sensitive
    ("a/b", "a/b/", False),  # a trailing '/' is an extra (empty) level
    ("/a", "/a", True),
    ("/a", "a", False),
    # '+': exactly one level
    ("+", "a", True),
    ("+", "a/b", False),
    ("a/+", "a/b", True),
    ("a/+", "a/b/c", False),
    ("a/+", "a", False),  # MQTT: "sport/tennis/+" does not match "sport/tennis"
    ("a/+", "a/", True),  # '+' matches an empty level
    ("+/+", "/finance", True),  # MQTT spec example
    ("/+", "/finance", True),  # MQTT spec example
    ("+", "/finance", False),  # MQTT spec example
    ("a/+/c", "a/b/c", True),
    ("a/+/c", "a/b/d", False),
    ("a/+/c", "a//c", True),
    ("+/b/+", "x/b/y", True),
    # '#': the rest, including the parent level
    ("#", "a", True),
    ("#", "a/b/c", True),
    ("a/#", "a/b", True),
    ("a/#", "a/b/c/d", True),
    ("a/#", "a", True),  # MQTT: "sport/#" matches "sport"
    ("sport/tennis/player1/#", "sport/tennis/player1", True),  # MQTT spec example
    ("sport/tennis/player1/#", "sport/tennis/player1/ranking", True),
    ("a/#", "b", False),
    ("a/#", "ab/c", False),
    ("a/b/#", "a", False),  # '#' only stands for the parent level, not the one above
    ("+/#", "a", True),
    ("+/#", "a/b/c", True),
    # the pipeline's own topics
    ("p/round/1/status/+", "p/round/1/status/hop-0", True),
    ("p/round/1/status/+", "p/round/1/status", False),
    ("p/round/1/hop/0", "p/round/11/hop/0", False),
    ("p/round/1/hop/0", "p/round/1/hop/0/x", False),
]


@pytest.mark.parametrize(("topic_filter", "topic", "expected"), TOPIC_TABLE)
def test_topic_matches(topic_filter: str, topic: str, expected: bool) -> None:
    assert topic_matches(topic_filter, topic) is expected


@pytest.mark.parametrize(("topic_filter", "topic"), [("#", "$SYS/x"), ("+/x", "$SYS/x")])
def test_wildcards_do_not_match_dollar_topics(topic_filter: str, topic: str) -> None:
    assert topic_matches(topic_filter, topic) is False


def test_dollar_topics_match_explicit_filters() -> None:
    assert topic_matches("$SYS/#", "$SYS/broker/load")
    assert topic_matches("$SYS/+", "$SYS/x")


# --- MemoryBroker -----------------------------------------------------------------------------


def drain(transport: MemoryTransport) -> list[Message]:
    """Everything queued for ``transport`` so far (no waiting)."""
    out: list[Message] = []
    while not transport._queue.empty():
        out.append(transport._queue.get_nowait())
    return out


async def next_messages(transport: MemoryTransport, n: int, timeout: float = 1.0) -> list[Message]:
    """The next n messages from the transport's async iterator."""
    iterator = transport.messages()
    out: list[Message] = []
    async with asyncio.timeout(timeout):
        while len(out) < n:
            out.append(await anext(iterator))
    return out


@pytest.mark.asyncio
async def test_delivery_to_matching_subscribers_in_order_exactly_once() -> None:
    broker = MemoryBroker()
    sender, wide, narrow, other = (broker.connect() for _ in range(4))
    await wide.subscribe("x/#")
    await narrow.subscribe("x/+/b")
    await other.subscribe("y/#")
    topics = ["x/1/b", "x/2/c", "x/3/b", "z/1/b", "x"]
    for index, topic in enumerate(topics):
        await sender.publish(topic, bytes([index]))
    assert await next_messages(wide, 4) == [
        Message("x/1/b", b"\x00"),
        Message("x/2/c", b"\x01"),
        Message("x/3/b", b"\x02"),
        Message("x", b"\x04"),
    ]
    assert drain(wide) == []  # exactly once
    assert drain(narrow) == [Message("x/1/b", b"\x00"), Message("x/3/b", b"\x02")]
    assert drain(other) == []  # nothing matched
    assert drain(sender) == []  # not subscribed: receives nothing, not even its own
    assert broker.published == len(topics)


@pytest.mark.asyncio
async def test_a_message_is_delivered_once_to_a_transport_with_overlapping_filters() -> None:
    broker = MemoryBroker()
    sender, receiver = broker.connect(), broker.connect()
    await receiver.subscribe("a/#")
    await receiver.subscribe("a/+")
    await sender.publish("a/b", b"m")
    assert drain(receiver) == [Message("a/b", b"m")]


@pytest.mark.asyncio
async def test_retained_message_reaches_a_later_subscriber() -> None:
    broker = MemoryBroker()
    sender = broker.connect()
    await sender.publish("s/hop-0", b"first", retain=True)
    await sender.publish("s/hop-0", b"ready", retain=True)  # replaces the kept one
    await sender.publish("s/hop-1", b"ready-1", retain=True)
    await sender.publish("s/plain", b"not kept")  # not retained: lost for later subscribers
    late = broker.connect()
    await late.subscribe("s/hop-0")
    assert drain(late) == [Message("s/hop-0", b"ready")]
    later = broker.connect()
    await later.subscribe("s/+")
    assert sorted(drain(later), key=lambda m: m.topic) == [
        Message("s/hop-0", b"ready"),
        Message("s/hop-1", b"ready-1"),
    ]
    # A subscriber present at publication gets the message live (and once).
    await sender.publish("s/hop-0", b"done", retain=True)
    assert drain(late) == [Message("s/hop-0", b"done")]


@pytest.mark.asyncio
async def test_empty_retained_payload_deletes_the_kept_message() -> None:
    broker = MemoryBroker()
    sender = broker.connect()
    await sender.publish("s/hop-0", b"ready", retain=True)
    await sender.publish("s/hop-1", b"ready", retain=True)
    await sender.publish("s/hop-0", b"", retain=True)
    late = broker.connect()
    await late.subscribe("s/#")
    assert drain(late) == [Message("s/hop-1", b"ready")]


@pytest.mark.asyncio
async def test_retained_message_does_not_reach_a_non_matching_subscriber() -> None:
    broker = MemoryBroker()
    sender = broker.connect()
    await sender.publish("s/hop-0", b"ready", retain=True)
    late = broker.connect()
    for topic_filter in ("s/hop-1", "s/hop-0/x", "t/#", "s", "+"):
        await late.subscribe(topic_filter)
    assert drain(late) == []


@pytest.mark.asyncio
async def test_publish_rejects_a_non_bytes_payload() -> None:
    broker = MemoryBroker()
    with pytest.raises(TypeError, match="bytes"):
        await broker.connect().publish("a", "text")  # type: ignore[arg-type]
    assert broker.published == 0


# --- publish_all ------------------------------------------------------------------------------


class CountingTransport:
    """A fake transport whose publish takes ``delay`` seconds; records what was published and
    the largest number of publishes in flight at once."""

    def __init__(self, delay: float = 0.001, fail_on: str | None = None) -> None:
        self.delay = delay
        self.fail_on = fail_on
        self.in_flight = 0
        self.max_in_flight = 0
        self.started: list[tuple[str, bytes]] = []
        self.finished: list[tuple[str, bytes]] = []
        self.cancelled = 0

    async def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.started.append((topic, payload))
        try:
            await asyncio.sleep(self.delay)
            if topic == self.fail_on:
                raise ConnectionError(f"lost while publishing {topic}")
            self.finished.append((topic, payload))
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1

    async def subscribe(self, topic_filter: str) -> None:
        raise NotImplementedError

    def messages(self) -> AsyncIterator[Message]:
        raise NotImplementedError


def make_items(n: int) -> list[tuple[str, bytes]]:
    return [(f"t/{i % 3}", i.to_bytes(4, "big")) for i in range(n)]


@pytest.mark.asyncio
@pytest.mark.parametrize(("n", "bound"), [(200, 8), (50, 1), (100, 64), (3, 10), (0, 4)])
async def test_publish_all_publishes_each_item_once_with_bounded_concurrency(
    n: int, bound: int
) -> None:
    transport = CountingTransport()
    items = make_items(n)
    pulled_while_in_flight: list[int] = []

    def lazily() -> Iterator[tuple[str, bytes]]:
        for item in items:
            # How many publishes are unfinished when the next item is taken: lazy means the
            # iterable is never read ahead of the free slots.
            pulled_while_in_flight.append(len(transport.started) - len(transport.finished))
            yield item

    count = await publish_all(transport, lazily(), max_in_flight=bound)
    assert count == n
    assert sorted(transport.finished) == sorted(items)  # every item exactly once
    assert transport.started == items  # started in the iterable's order
    assert transport.max_in_flight <= bound
    if n >= bound:
        assert transport.max_in_flight == bound  # and the bound is actually used
    assert max(pulled_while_in_flight, default=0) <= bound
    assert transport.in_flight == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("bad", [0, -1])
async def test_publish_all_rejects_max_in_flight_below_one(bad: int) -> None:
    transport = CountingTransport()
    with pytest.raises(InvalidParameterError, match="max_in_flight"):
        await publish_all(transport, make_items(5), max_in_flight=bad)
    assert transport.started == []


@pytest.mark.asyncio
async def test_publish_all_raises_a_publish_error_and_cancels_the_rest() -> None:
    transport = CountingTransport(delay=0.01, fail_on="t/0")
    items = [("t/1", b"a"), ("t/1", b"b"), ("t/0", b"boom"), *make_items(50)]
    with pytest.raises(ExceptionGroup) as caught:
        await publish_all(transport, items, max_in_flight=4)
    assert caught.group_contains(ConnectionError, match="t/0")
    assert transport.in_flight == 0
    assert len(transport.started) < len(items)  # the iterable was not exhausted


# --- Inbox ------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_inbox_get_times_out_with_none_and_keeps_working() -> None:
    broker = MemoryBroker()
    sender, receiver = broker.connect(), broker.connect()
    await receiver.subscribe("in/#")
    async with Inbox(receiver) as inbox:
        started = time.monotonic()
        assert await inbox.get(0.05) is None
        elapsed = time.monotonic() - started
        assert 0.04 <= elapsed < 1.0
        assert await inbox.get(0) is None  # zero (and negative) timeouts poll
        assert await inbox.get(-1.0) is None
        for index in range(5):
            await sender.publish(f"in/{index}", bytes([index]))
            await sender.publish("out/ignored", b"x")
        got = [await inbox.get(1.0) for _ in range(5)]
        assert got == [Message(f"in/{i}", bytes([i])) for i in range(5)]
        assert await inbox.get(0.02) is None
        # A get that is waiting when the message arrives returns it.
        waiter = asyncio.create_task(inbox.get(2.0))
        await asyncio.sleep(0.02)
        await sender.publish("in/late", b"late")
        assert await waiter == Message("in/late", b"late")
        await sender.publish("in/untimed", b"u")
        assert await inbox.get(None) == Message("in/untimed", b"u")


@pytest.mark.asyncio
async def test_inbox_get_never_swallows_a_cancellation() -> None:
    """A reader cancelled (e.g. by Ctrl-C) in the same loop step in which a message arrives must
    still be cancelled. Python 3.11's asyncio.wait_for returned the message and dropped the
    cancellation then; `shuffledp simulate` kept running after Ctrl-C while progress messages
    streamed in. Tried in every order of arrival and cancellation, many times."""
    broker = MemoryBroker()
    sender, receiver = broker.connect(), broker.connect()
    await receiver.subscribe("in/#")
    async with Inbox(receiver) as inbox:
        for attempt in range(200):
            waiter = asyncio.create_task(inbox.get(5.0))
            await asyncio.sleep(0)  # the get is now waiting on the queue
            if attempt % 2:
                waiter.cancel()
                await sender.publish("in/x", b"x")
            else:
                await sender.publish("in/x", b"x")
                waiter.cancel()
            for _ in range(attempt % 4):  # let the pump run 0..3 steps before the check
                await asyncio.sleep(0)
            with pytest.raises(asyncio.CancelledError):
                await waiter
            while await inbox.get(0) is not None:  # the message stays for the next reader
                pass


class _SlowToStop:
    """A transport whose message stream takes a while to stop when cancelled."""

    async def messages(self) -> AsyncIterator[object]:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)
            raise
        yield None  # pragma: no cover - never reached


@pytest.mark.asyncio
async def test_leaving_an_inbox_never_swallows_a_cancellation() -> None:
    """Cancelled while the Inbox stops its pump: the pump's own cancellation ends there, the
    reader's is raised (it was swallowed with the pump's, and the round went on)."""

    async def reader() -> str:
        async with Inbox(_SlowToStop()):  # type: ignore[arg-type]
            await asyncio.sleep(0)  # the pump starts
        return "left normally"

    task = asyncio.create_task(reader())
    await asyncio.sleep(0.01)  # the inbox is now waiting for its pump to stop
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.asyncio
async def test_inbox_loses_no_message_across_many_timeouts() -> None:
    """Messages published at irregular times while the reader polls with very short timeouts
    (every timed-out get cancels a pending queue read): all arrive, once, in order."""
    broker = MemoryBroker()
    sender, receiver = broker.connect(), broker.connect()
    await receiver.subscribe("in")
    n = 300

    async def produce() -> None:
        for index in range(n):
            await sender.publish("in", index.to_bytes(2, "big"))
            if index % 7 == 0:
                await asyncio.sleep(0.001 * (index % 3))

    got: list[int] = []
    timeouts = 0
    async with Inbox(receiver) as inbox, asyncio.TaskGroup() as group:
        group.create_task(produce())
        while len(got) < n:
            message = await inbox.get([0.0, 0.0005, 0.001][len(got) % 3])
            if message is None:
                timeouts += 1
                continue
            got.append(int.from_bytes(message.payload, "big"))
    assert got == list(range(n))
    assert timeouts > 0  # the timeout path was exercised


class FailingTransport:
    """Delivers one message, then the connection fails."""

    async def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> None:
        raise NotImplementedError

    async def subscribe(self, topic_filter: str) -> None:
        return None

    async def messages(self) -> AsyncIterator[Message]:
        yield Message("a", b"1")
        raise ConnectionError("connection lost")


@pytest.mark.asyncio
async def test_inbox_raises_the_transport_failure_on_every_later_get() -> None:
    async with Inbox(FailingTransport()) as inbox:
        assert await inbox.get(1.0) == Message("a", b"1")
        for _ in range(2):
            with pytest.raises(ConnectionError, match="connection lost"):
                await inbox.get(1.0)


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b'{"state": "ready"}', {"state": "ready"}),
        (b"[1]", None),
        (b"null", None),
        (b"{", None),
        (b"\xff", None),
        (b"", None),
    ],
)
def test_decode_json(payload: bytes, expected: dict[str, str] | None) -> None:
    assert decode_json(payload) == expected


def test_decode_json_of_a_deeply_nested_payload_is_none() -> None:
    assert decode_json(b"[" * 100_000) is None


# --- a broker that drops, a lost session --------------------------------------------------------


async def lossy_round(seed: int) -> tuple[list[bytes], int, LossyMemoryBroker]:
    broker = LossyMemoryBroker(rate=0.1, seed=seed, drop_topics=("drop/#",))
    sender, receiver = broker.connect(), broker.connect()
    await receiver.subscribe("#")
    for index in range(2000):
        await sender.publish("drop/x", index.to_bytes(2, "big"))
    for _index in range(50):
        await sender.publish("keep/x", b"k")  # not a dropped topic
    await sender.publish("drop/status", b"retained", retain=True)  # retained: never dropped
    got = []
    while not receiver._queue.empty():
        got.append(receiver._queue.get_nowait().payload)
    return got, broker.dropped, broker


@pytest.mark.asyncio
async def test_the_lossy_broker_drops_a_seeded_tenth_of_its_topics_deliveries_only() -> None:
    got, dropped, broker = await lossy_round(7)
    assert got.count(b"k") == 50 and got[-1] == b"retained"
    delivered = [p for p in got if p not in (b"k", b"retained")]
    assert len(delivered) + dropped == 2000  # every delivery either arrives or is counted
    assert broker.published == 2051
    # Binomial(2000, 0.1): mean 200, sd 13.4; outside [140, 260] has probability < 1e-5.
    assert 140 <= dropped <= 260
    assert delivered == sorted(delivered)  # what arrives keeps its order
    again, dropped_again, _ = await lossy_round(7)
    assert (again, dropped_again) == (got, dropped)  # seeded: the same drops every run
    with pytest.raises(InvalidParameterError, match="drop rate must be in"):
        LossyMemoryBroker(rate=1.0, seed=1)


@pytest.mark.asyncio
async def test_a_lost_session_empties_the_queue_and_is_counted() -> None:
    broker = MemoryBroker()
    sender, receiver = broker.connect(), broker.connect()
    await receiver.subscribe("t")
    assert sessions_lost(receiver) == 0
    await sender.publish("t", b"1")
    await sender.publish("t", b"2")
    assert receiver.lose_session() == 2
    assert sessions_lost(receiver) == 1 and receiver._queue.empty()
    await sender.publish("t", b"3")  # still subscribed, as after a reconnect
    assert receiver._queue.get_nowait().payload == b"3"

    class Plain:  # a transport that does not report sessions: never any loss
        async def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> None: ...

    assert sessions_lost(Plain()) == 0  # type: ignore[arg-type]
