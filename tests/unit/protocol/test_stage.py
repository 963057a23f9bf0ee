"""protocol/stage.py: the pure core (CollectClock, Readiness, split_burst) by known answers, and
the Stage shell over the in-memory broker: collection ends when everything expected arrived or
at the deadline with the count short, the downstream's ready is awaited (and noticed while
collecting), every message is acknowledged once, the retained status is cleared however the
stage ends, and tasks started on the stage deliver their result or error where awaited."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from shuffledp.protocol.runtime import NotReadyError, closing_time, decode_json, publish_state
from shuffledp.protocol.stage import CollectClock, Readiness, Stage, split_burst
from shuffledp.protocol.topics import ingress_topic, progress_topic, status_topic
from shuffledp.protocol.transport import MemoryBroker, MemoryTransport, Message

PREFIX = "test/stage"
ROUND = 3
INGRESS = ingress_topic(PREFIX, ROUND, 1)


# --- pure core --------------------------------------------------------------------------------


def test_collect_clock_closes_where_closing_time_says_and_moves_with_the_first_arrival() -> None:
    hop0 = CollectClock(stage_index=0, deadline=2.0, ready_at=10.0)
    assert hop0.close_at == 12.0
    assert not hop0.expired(11.999) and hop0.expired(12.0)
    later = CollectClock(stage_index=2, deadline=2.0, ready_at=10.0)
    assert later.close_at == 16.0  # (index + 1) * deadline while nothing arrived
    later.arrived(11.0)
    later.arrived(15.0)  # only the first arrival counts
    assert later.first_arrival == 11.0 and later.close_at == 13.0
    for index, first in [(0, None), (1, None), (3, 10.5), (1, 12.25)]:
        clock = CollectClock(stage_index=index, deadline=1.5, ready_at=10.0, first_arrival=first)
        assert clock.close_at == closing_time(
            stage_index=index, ready_at=10.0, first_arrival=first, deadline=1.5
        )


def test_collect_clock_progress_is_due_once_per_interval_and_bounds_the_wait() -> None:
    clock = CollectClock(stage_index=0, deadline=10.0, ready_at=100.0, interval=0.5)
    assert clock.wait(100.0) == 0.5  # the next progress comes before the close
    assert not clock.progress_due(100.4)
    assert clock.progress_due(100.6)
    assert not clock.progress_due(100.6)  # once: the next is due at 101.1
    assert clock.next_progress == pytest.approx(101.1)
    assert clock.wait(101.0) == pytest.approx(0.1)
    clock.next_progress = 200.0
    assert clock.wait(109.0) == pytest.approx(1.0)  # now the close comes first


def test_readiness_follows_the_downstream_status_only() -> None:
    topic = status_topic(PREFIX, ROUND, "hop-1")
    readiness = Readiness("hop-1", topic)
    assert readiness.ready is False
    other = Message(status_topic(PREFIX, ROUND, "hop-2"), json.dumps({"state": "ready"}).encode())
    assert readiness.note(other) is False and readiness.ready is False
    for state, ready in [("ready", True), ("done", False), ("working", True), ("failed", False)]:
        assert readiness.note(Message(topic, json.dumps({"state": state}).encode())) is True
        assert readiness.ready is ready, state
    readiness.note(Message(topic, json.dumps({"state": "ready"}).encode()))
    for gone in (b"", b"not json", b"[1]"):  # cleared (the stage left) or unreadable
        readiness.note(Message(topic, gone))
        assert readiness.ready is False
        readiness.ready = True


def test_split_burst_keeps_arrival_order_on_both_sides() -> None:
    messages = [Message(INGRESS if i % 3 else "x/y", bytes([i])) for i in range(10)]
    inputs, others = split_burst(messages, INGRESS)
    assert [m.payload[0] for m in inputs] == [1, 2, 4, 5, 7, 8]
    assert [m.payload[0] for m in others] == [0, 3, 6, 9]


# --- the shell over the in-memory broker ------------------------------------------------------


class Recording(MemoryTransport):
    """A connection that remembers what it acknowledged."""

    def __init__(self, broker: MemoryBroker) -> None:
        super().__init__(broker)
        broker._transports.append(self)
        self.acked: list[Message] = []

    def ack(self, message: Message) -> None:
        self.acked.append(message)


@dataclass(slots=True)
class Counter:
    """An Intake expecting ``expected`` inputs; bursts of ``burst``."""

    expected: int
    ingress: str = INGRESS
    burst: int = 4
    taken: list[bytes] = field(default_factory=list)
    bursts: list[int] = field(default_factory=list)

    def complete(self) -> bool:
        return len(self.taken) >= self.expected

    async def take(self, payloads: list[bytes]) -> None:
        self.bursts.append(len(payloads))
        self.taken.extend(payloads)

    def counts(self) -> dict[str, Any]:
        return {"accepted": len(self.taken), "expected": self.expected}


async def send(broker: MemoryBroker, payloads: list[bytes], *, topic: str = INGRESS) -> None:
    sender = broker.connect()
    for payload in payloads:
        await sender.publish(topic, payload)


def drained(transport: MemoryTransport) -> list[Message]:
    out = []
    while not transport._queue.empty():
        out.append(transport._queue.get_nowait())
    return out


def stage_on(transport: MemoryTransport, **kwargs: Any) -> Stage:
    return Stage(transport, prefix=PREFIX, round_id=ROUND, name="hop-1", **kwargs)


@pytest.mark.asyncio
async def test_collect_completes_when_every_expected_input_arrived() -> None:
    broker = MemoryBroker()
    transport = Recording(broker)
    intake = Counter(expected=10)
    payloads = [bytes([i]) * 8 for i in range(10)]
    async with stage_on(transport, downstream="hop-2") as stage:
        await stage.subscribe(INGRESS)
        await stage.subscribe("noise/#")
        ready_at = await stage.announce_ready()
        await send(broker, [b"n1", b"n2"], topic="noise/a")  # not inputs: never taken
        await send(broker, payloads)
        await send(broker, [b"late"])  # after the batch is complete: left alone
        clock = CollectClock(stage_index=1, deadline=30.0, ready_at=ready_at)
        timed_out = await stage.collect(intake, clock)
        elapsed = time.monotonic() - ready_at
    assert timed_out is False
    assert elapsed < 5.0  # far before the deadline
    assert intake.taken == payloads  # in order, each once
    assert max(intake.bursts) <= intake.burst and sum(intake.bursts) == 10
    assert clock.first_arrival is not None
    acked = [m.payload for m in transport.acked]
    assert sorted(acked) == sorted([b"n1", b"n2", *payloads])  # each once, "late" not yet


@pytest.mark.asyncio
async def test_collect_closes_on_the_deadline_with_the_count_short(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("shuffledp.protocol.stage.DRAIN_QUIET", 0.3)  # the drain's own tests below
    broker = MemoryBroker()
    transport = broker.connect()
    watcher = broker.connect()
    await watcher.subscribe(progress_topic(PREFIX, ROUND, "hop-1"))
    intake = Counter(expected=10)
    seen: list[dict[str, Any]] = []
    async with stage_on(transport, on_progress=seen.append) as stage:
        await stage.subscribe(INGRESS)
        ready_at = await stage.announce_ready()
        await send(broker, [bytes([i]) for i in range(7)])
        clock = CollectClock(stage_index=0, deadline=0.8, ready_at=ready_at, interval=0.3)
        timed_out = await stage.collect(intake, clock)
        elapsed = time.monotonic() - ready_at
    assert timed_out is True
    assert len(intake.taken) == 7
    assert 0.8 <= elapsed < 2.5
    # progress went out while waiting: on the progress topic and to on_progress, same counts
    published = [decode_json(m.payload) for m in drained(watcher)]
    assert len(published) >= 1 and len(published) == len(seen)
    assert all(body is not None and body["expected"] == 10 for body in published)
    assert seen[-1] == {"accepted": 7, "expected": 10}


@pytest.mark.asyncio
async def test_a_later_stage_waits_for_its_upstream_longer_than_its_deadline() -> None:
    """Stage index 2 with nothing arriving closes at 3 deadlines after ready, not one."""
    broker = MemoryBroker()
    async with stage_on(broker.connect()) as stage:
        await stage.subscribe(INGRESS)
        ready_at = await stage.announce_ready()
        clock = CollectClock(stage_index=2, deadline=0.3, ready_at=ready_at)
        assert await stage.collect(Counter(expected=1), clock) is True
        assert 0.9 <= time.monotonic() - ready_at < 2.5


@pytest.mark.asyncio
async def test_await_downstream_returns_only_once_the_downstream_is_ready() -> None:
    broker = MemoryBroker()
    other = broker.connect()
    async with stage_on(broker.connect(), downstream="hop-2") as stage:
        waiting = asyncio.create_task(stage.await_downstream(10.0, who="hop-1: hop-2"))
        await publish_state(other, PREFIX, ROUND, "hop-2", "waiting")
        await asyncio.sleep(0.2)
        assert not waiting.done()  # "waiting" is not ready
        started = time.monotonic()
        await publish_state(other, PREFIX, ROUND, "hop-2", "ready")
        await asyncio.wait_for(waiting, 2.0)
        assert time.monotonic() - started < 1.0


@pytest.mark.asyncio
async def test_a_ready_seen_while_collecting_means_no_wait_afterwards() -> None:
    broker = MemoryBroker()
    await publish_state(broker.connect(), PREFIX, ROUND, "hop-2", "ready")  # retained
    async with stage_on(broker.connect(), downstream="hop-2") as stage:
        await stage.subscribe(INGRESS)
        ready_at = await stage.announce_ready()
        await send(broker, [b"a", b"b"])
        clock = CollectClock(stage_index=1, deadline=30.0, ready_at=ready_at)
        await stage.collect(Counter(expected=2), clock)
        assert stage.readiness is not None and stage.readiness.ready
        started = time.monotonic()
        await stage.await_downstream(0.05, who="hop-1: hop-2")  # would time out if it waited
        assert time.monotonic() - started < 0.05


@pytest.mark.asyncio
async def test_a_ready_seen_before_a_lost_session_is_not_trusted() -> None:
    """Hop 1 saw hop 2's ready, then its connection to the broker was lost and the broker came
    back without hop 2's subscription or retained status (killed -9, no save): hop 1 must not
    publish to hop 2 on the strength of the old ready, only once hop 2 announces again. A ready
    still unread in the inbox when the session was lost does not count either."""
    broker = MemoryBroker()
    downstream = broker.connect()
    await publish_state(downstream, PREFIX, ROUND, "hop-2", "ready")  # retained
    transport = broker.connect()
    async with stage_on(transport, downstream="hop-2") as stage:
        await stage.await_downstream(1.0, who="hop-1: hop-2")  # the ready before the crash
        await publish_state(downstream, PREFIX, ROUND, "hop-2", "working")  # not yet read
        await asyncio.sleep(0.05)  # the inbox pump has taken it: read by nobody yet
        stale = stage._inbox._queue.qsize()
        broker._retained.clear()  # the broker restarted without its state
        transport.sessions_lost += 1  # the session is lost, what was received is kept
        assert stale >= 1
        with pytest.raises(NotReadyError, match="hop-1: hop-2 did not announce ready"):
            await stage.await_downstream(0.3, who="hop-1: hop-2")
        assert stage.readiness is not None and not stage.readiness.ready
        await publish_state(downstream, PREFIX, ROUND, "hop-2", "ready")  # hop 2 is back
        await stage.await_downstream(1.0, who="hop-1: hop-2")
        assert stage.readiness.ready and stage.readiness.epoch == 1


def test_readiness_ignores_statuses_from_before_its_epoch() -> None:
    topic = status_topic(PREFIX, ROUND, "hop-2")
    ready = json.dumps({"state": "ready"}).encode()
    readiness = Readiness("hop-2", topic)
    assert readiness.note(Message(topic, ready, epoch=0)) and readiness.ready
    readiness.distrust(0)  # the same epoch: nothing changes
    assert readiness.ready
    readiness.distrust(2)
    assert not readiness.ready and readiness.state is None
    assert readiness.note(Message(topic, ready, epoch=1)) is True  # taken, but stale
    assert not readiness.ready
    assert readiness.note(Message(topic, ready, epoch=2)) and readiness.ready
    readiness.distrust(1)  # an older epoch never goes back
    assert readiness.ready and readiness.epoch == 2


@pytest.mark.asyncio
async def test_not_ready_in_time_announces_failed_raises_and_clears_the_status() -> None:
    broker = MemoryBroker()
    watch = broker.connect()
    own = status_topic(PREFIX, ROUND, "hop-1")
    await watch.subscribe(own)
    started = time.monotonic()
    with pytest.raises(NotReadyError, match=r"hop-1 of round 3: hop-2 did not announce ready"):
        async with stage_on(broker.connect(), downstream="hop-2") as stage:
            await stage.announce_ready()
            await stage.await_downstream(0.3, who="hop-1 of round 3: hop-2")
    assert 0.3 <= time.monotonic() - started < 2.0
    bodies = [decode_json(m.payload) if m.payload else None for m in drained(watch)]
    assert [b and b["state"] for b in bodies] == ["ready", "failed", None]
    assert bodies[1] is not None and bodies[1]["error"] == "hop-2 not ready"
    late = broker.connect()
    await late.subscribe(own)
    assert drained(late) == []  # nothing retained


@pytest.mark.asyncio
async def test_started_tasks_deliver_results_and_errors_and_stop_with_the_stage() -> None:
    broker = MemoryBroker()
    watch = broker.connect()
    await watch.subscribe(status_topic(PREFIX, ROUND, "hop-1"))
    blocked = asyncio.Event()

    async def forever() -> None:
        blocked.set()
        await asyncio.Event().wait()

    async def fails() -> int:
        raise ValueError("sealing failed")

    with pytest.raises(ValueError, match="sealing failed"):  # not an ExceptionGroup
        async with stage_on(broker.connect()) as stage:
            assert await stage.start(asyncio.to_thread(sum, [1, 2, 3]), name="sum") == 6
            hanging = stage.start(forever(), name="forever")
            await blocked.wait()
            await stage.announce("working")
            await stage.start(fails(), name="fails")
    assert hanging.cancelled()  # the stage ended: its unfinished task was stopped
    payloads = [m.payload for m in drained(watch)]
    assert payloads[-1] == b""  # the status was cleared although the block failed


@pytest.mark.asyncio
async def test_a_stage_past_its_deadline_still_takes_what_was_delivered() -> None:
    """A stalled stage (its closing time passed before it read anything) drains its inbox, and
    what keeps arriving, before it applies the deadline: nothing delivered is left unread."""
    broker = MemoryBroker()
    intake = Counter(expected=20)
    async with stage_on(broker.connect()) as stage:
        await stage.subscribe(INGRESS)
        ready_at = await stage.announce_ready()
        await send(broker, [bytes([i]) for i in range(7)])  # queued while it was stalled
        clock = CollectClock(stage_index=0, deadline=1.0, ready_at=ready_at - 100.0)
        assert clock.expired(time.monotonic())
        later = asyncio.get_running_loop().call_later(
            0.2, lambda: asyncio.ensure_future(send(broker, [b"x", b"y"]))
        )
        timed_out = await stage.collect(intake, clock)
        later.cancel()
    assert timed_out is True
    assert intake.taken == [bytes([i]) for i in range(7)] + [b"x", b"y"]


class Claims:
    """An Aside taking the messages under ``claims/#``, ticked at every progress."""

    def __init__(self) -> None:
        self.noted: list[bytes] = []
        self.ticks = 0

    def wants(self, topic: str) -> bool:
        return topic.startswith("claims/")

    def note(self, message: Message) -> None:
        self.noted.append(message.payload)

    async def tick(self) -> None:
        self.ticks += 1


@pytest.mark.asyncio
async def test_the_aside_gets_its_messages_while_collecting_and_serving() -> None:
    broker = MemoryBroker()
    intake = Counter(expected=3)
    aside = Claims()
    async with stage_on(broker.connect()) as stage:
        stage.aside = aside
        await stage.subscribe(INGRESS)
        await stage.subscribe("claims/#")
        ready_at = await stage.announce_ready()
        await send(broker, [b"c1"], topic="claims/a")
        await send(broker, [b"1", b"2", b"3"])
        clock = CollectClock(stage_index=0, deadline=30.0, ready_at=ready_at, interval=0.05)
        assert await stage.collect(intake, clock) is False
        await send(broker, [b"c2"], topic="claims/b")
        assert await stage.serve(lambda: len(aside.noted) == 2, timeout=30.0) is True
        assert await stage.serve(lambda: False, timeout=0.2) is False
    assert intake.taken == [b"1", b"2", b"3"]  # the claims are never inputs
    assert aside.noted == [b"c1", b"c2"]
    assert aside.ticks >= 2  # serve ticks first, then every interval


def test_readiness_remembers_that_the_stage_finished_after_it_cleared_its_status() -> None:
    topic = status_topic(PREFIX, ROUND, "hop-0")
    readiness = Readiness("hop-0", topic)
    states = [b'{"state": "ready"}', b'{"state": "done"}', b""]
    seen = []
    for payload in states:
        readiness.note(Message(topic, payload))
        seen.append((readiness.state, readiness.ready, readiness.finished))
    assert seen == [("ready", True, False), ("done", False, True), (None, False, True)]
    crashed = Readiness("hop-0", topic)
    for payload in (b'{"state": "ready"}', b""):  # its will cleared it: not an end
        crashed.note(Message(topic, payload))
    assert (crashed.state, crashed.ready, crashed.finished) == (None, False, False)
