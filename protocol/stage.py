"""One stage of a round (a hop, the analyzer, a client process) on its transport: the steps they
all take, written once.

Every stage of the pipeline does the same few things around its own work:

- **lifecycle**: it announces itself on its retained status topic (``ready``/``waiting``, then
  ``done``, ``refused`` or ``failed``) and clears that status when it ends, however it ends (a
  stale ``ready`` would make a later upstream publish before anyone listens);
- **collect until complete or deadline** (hops and the analyzer): take what arrives on the ingress
  topic in bursts (everything already received, up to a limit: one thread hop, one journal fsync
  per burst), hand each burst to the stage's own logic, and stop when that logic says the batch
  is complete or at the closing time (:func:`~shuffledp.protocol.runtime.closing_time`),
  publishing progress every :data:`PROGRESS_INTERVAL` seconds meanwhile;
- **await downstream ready**: publish downstream only after the downstream announced ``ready``
  (an MQTT broker drops what nobody subscribes to); the downstream's status is followed all the
  time, also while collecting, so a stage whose downstream is long ready does not wait at all;
  after ``ready_timeout`` seconds the stage announces ``failed`` and raises NotReadyError. A
  ``ready`` received before the connection was lost (the transport's epoch grew) no longer
  counts: a broker that crashed may have restarted without the downstream's subscription, so
  only a status received since says it listens (:meth:`Readiness.distrust`);
- **settle**: acknowledge every message once it is dealt with (journaled, or not to be kept),
  or the broker's window of unacknowledged messages fills up and it stops delivering;
- **drain before the deadline**: once the closing time has passed, a collecting stage still
  takes what keeps arriving (a stage that was stalled finds its inbox, and the broker's queue,
  full) and closes only after :data:`DRAIN_QUIET` seconds without input (at most one more
  ``deadline``): a deadline never discards what was already delivered;
- **aside** (hop 0): messages on other topics than the ingress (client processes' claims) go
  to the stage's :class:`Aside`, which is also ticked at every progress and while the stage
  serves after its batch is out (:meth:`Stage.serve`).

The module is a pure core and a thin asyncio shell. The core decides without any I/O:
:class:`Readiness` (is the downstream listening, from its status payloads), :class:`CollectClock`
(when to close, when progress is due, how long to wait for the next message) and
:func:`split_burst` (inputs versus everything else). The shell, :class:`Stage`, owns the
connection's side: ``async with Stage(...) as stage`` opens an asyncio.TaskGroup whose named
tasks are the inbox pump (``<stage>-inbox``) and whatever the stage starts with
:meth:`Stage.start`; leaving the block clears the retained status and stops those tasks. What a
stage does with its inputs is an :class:`Intake` (hop and analyzer each have one), so the loop
has no closures and no shared mutable locals::

    async with Stage(transport, prefix=p, round_id=r, name="hop-0", downstream="hop-1") as stage:
        await stage.subscribe(ingress)
        ready_at = await stage.announce_ready()
        timed_out = await stage.collect(intake, CollectClock.starting(...))
        ...
        await stage.await_downstream(ready_timeout, who="hop-0 of round 7: hop-1")
        ...publish downstream...
        await stage.announce("done", log=log)
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from shuffledp.protocol.runtime import (
    READY_STATES,
    Inbox,
    NotReadyError,
    closing_time,
    decode_json,
    publish_progress,
    publish_state,
    retained_status,
)
from shuffledp.protocol.topics import status_topic
from shuffledp.protocol.transport import (
    AcknowledgingTransport,
    Message,
    Transport,
    connection_epoch,
)

__all__ = [
    "DRAIN_QUIET",
    "PROGRESS_INTERVAL",
    "Aside",
    "CollectClock",
    "Intake",
    "Readiness",
    "Stage",
    "split_burst",
]

END_STATES = frozenset({"done", "refused", "failed"})
"""States a stage announces when it has ended its part of the round."""
PROGRESS_INTERVAL = 0.5
"""Seconds between progress messages while a stage works."""
DRAIN_QUIET = 1.0
"""Past its closing time, a stage stops collecting once nothing came for this many seconds."""

T = TypeVar("T")


# --- pure core --------------------------------------------------------------------------------


@dataclass(slots=True)
class Readiness:
    """Whether the stage ``stage`` listens, from the last status it retained on ``topic``.

    ``ready`` follows that status: True while it is ``ready`` or ``working``, False once it is
    anything else or cleared (an empty payload: the stage left)."""

    stage: str
    topic: str
    ready: bool = False
    state: str | None = None
    """The last state it announced (None: none yet, or cleared: it left)."""
    finished: bool = False
    """True once it announced an end (``done``, ``refused``, ``failed``), even if it has
    cleared its status since (a stage clears it right after: both may come in one read)."""
    epoch: int = 0
    """The connection epoch a status must have been received in to count
    (:meth:`distrust`)."""

    def distrust(self, epoch: int) -> None:
        """The connection was lost and is now in ``epoch``: a broker that crashed may have
        restarted without the downstream's subscription or retained status, so what was seen
        before no longer says that it listens. Until a status received in ``epoch`` or later
        comes (the downstream announces again once it is back), it is not ready."""
        if epoch > self.epoch:
            self.epoch = epoch
            self.ready = False
            self.state = None

    def note(self, message: Message) -> bool:
        """Take ``message`` into account if it is the downstream's status; True iff it was (a
        status received before the current epoch is taken and ignored)."""
        if message.topic != self.topic:
            return False
        if message.epoch < self.epoch:
            return True  # received before the connection was lost: stale
        body = decode_json(message.payload)
        state = None if body is None else body.get("state")
        self.state = state if isinstance(state, str) else None
        self.ready = self.state in READY_STATES
        self.finished = self.finished or self.state in END_STATES
        return True


@dataclass(slots=True, kw_only=True)
class CollectClock:
    """When a collecting stage closes and when its next progress is due (monotonic seconds;
    pure: the caller says what time it is).

    ``stage_index``, ``deadline``, ``ready_at`` and ``first_arrival`` are
    :func:`~shuffledp.protocol.runtime.closing_time`'s; ``first_arrival`` is set by
    :meth:`arrived` the first time inputs come."""

    stage_index: int
    deadline: float
    ready_at: float
    first_arrival: float | None = None
    interval: float = PROGRESS_INTERVAL
    next_progress: float = field(init=False)
    close_at: float = field(init=False)
    """When collection stops (kept up to date by :meth:`arrived`)."""

    def __post_init__(self) -> None:
        self.next_progress = self.ready_at + self.interval
        self._close()

    def _close(self) -> None:
        self.close_at = closing_time(
            stage_index=self.stage_index,
            ready_at=self.ready_at,
            first_arrival=self.first_arrival,
            deadline=self.deadline,
        )

    def expired(self, now: float) -> bool:
        return now >= self.close_at

    def progress_due(self, now: float) -> bool:
        """True iff progress is due at ``now``; the next one is then due an interval later."""
        if now < self.next_progress:
            return False
        self.next_progress = now + self.interval
        return True

    def wait(self, now: float) -> float:
        """Seconds to wait for a message before something else is due."""
        return min(self.close_at, self.next_progress) - now

    def arrived(self, now: float) -> None:
        """Inputs came at ``now``: the first time, the closing time may move."""
        if self.first_arrival is None:
            self.first_arrival = now
            self._close()


def split_burst(messages: Iterable[Message], ingress: str) -> tuple[list[Message], list[Message]]:
    """(the messages on ``ingress``, the others), each in arrival order."""
    inputs: list[Message] = []
    others: list[Message] = []
    for message in messages:
        (inputs if message.topic == ingress else others).append(message)
    return inputs, others


class Intake(Protocol):
    """What a collecting stage does with its inputs (a hop's and the analyzer's own logic).

    ``ingress``: the topic inputs arrive on; ``burst``: how many are taken at once;
    ``complete()``: True once nothing more is to be collected; ``take(payloads)``: offer (and
    journal) a burst, after which the stage acknowledges it; ``counts()``: the progress counts."""

    @property
    def ingress(self) -> str: ...

    @property
    def burst(self) -> int: ...

    def complete(self) -> bool: ...

    async def take(self, payloads: list[bytes]) -> None: ...

    def counts(self) -> dict[str, Any]: ...


class Aside(Protocol):
    """What a stage does with messages on topics other than its ingress and its downstream's
    status (hop 0: the client processes' claims). ``wants(topic)``: True for its topics;
    ``note(message)``: take one (no I/O: called between bursts); ``tick()``: its periodic work
    (hop 0 publishes the receipts due), at every progress and while the stage serves."""

    def wants(self, topic: str) -> bool: ...

    def note(self, message: Message) -> None: ...

    async def tick(self) -> None: ...


# --- asyncio shell ----------------------------------------------------------------------------


class Stage:
    """A stage's side of the transport for one round (module docstring).

    ``downstream``: the stage whose ``ready`` this one awaits before publishing to it (its status
    topic is subscribed on entry and followed from then on), or None. ``on_progress``: also
    called with every progress's counts (before they are published).
    """

    def __init__(
        self,
        transport: Transport,
        *,
        prefix: str,
        round_id: int,
        name: str,
        downstream: str | None = None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.transport = transport
        self.prefix = prefix
        self.round_id = round_id
        self.name = name
        self.readiness = (
            None
            if downstream is None
            else Readiness(downstream, status_topic(prefix, round_id, downstream))
        )
        self.ready_at: float | None = None
        self.aside: Aside | None = None
        self._on_progress = on_progress
        self._acknowledging = transport if isinstance(transport, AcknowledgingTransport) else None
        self._group = asyncio.TaskGroup()
        self._tasks: set[asyncio.Task[Any]] = set()  # started, not finished
        self._inbox = Inbox(transport, name=f"{name}-inbox", group=self._group)
        self._stack = contextlib.AsyncExitStack()

    async def __aenter__(self) -> Stage:
        await self._group.__aenter__()
        try:
            await self._stack.enter_async_context(self._inbox)
            await self._stack.enter_async_context(
                retained_status(self.transport, self.prefix, self.round_id, self.name)
            )
            if self.readiness is not None:
                await self.transport.subscribe(self.readiness.topic)
        except BaseException:
            await self._close()
            raise
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        """Clear the status, stop the tasks; the block's own error goes on unchanged (a
        TaskGroup would wrap it in an ExceptionGroup), else a failed task's error is raised."""
        try:
            await self._close()
        except BaseExceptionGroup as failed:
            if exc is None or isinstance(exc, asyncio.CancelledError):
                if len(failed.exceptions) == 1:
                    raise failed.exceptions[0] from None
                raise
        return None

    async def _close(self) -> None:
        try:
            await self._stack.aclose()  # clears the retained status, then stops the inbox
        finally:
            for task in list(self._tasks):
                task.cancel()
            await self._group.__aexit__(None, None, None)

    def start(self, work: Coroutine[Any, Any, T], *, name: str) -> asyncio.Future[T]:
        """Run ``work`` as a task named ``name`` of the stage's TaskGroup; its result, or its
        error, comes where the returned future is awaited (an error does not cancel the stage
        as a TaskGroup would: the stage still clears its status). A task not finished when the
        stage ends is cancelled."""
        outcome: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        task = self._group.create_task(_deliver(work, outcome), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return outcome

    async def subscribe(self, topic_filter: str) -> None:
        await self.transport.subscribe(topic_filter)

    async def announce(self, state: str, **fields: Any) -> None:
        """Publish ``state`` (and ``fields``) as the stage's retained status."""
        await publish_state(self.transport, self.prefix, self.round_id, self.name, state, **fields)

    async def announce_ready(self) -> float:
        """Announce ``ready``; returns (and keeps in ``ready_at``) the monotonic time after."""
        await self.announce("ready")
        self.ready_at = time.monotonic()
        return self.ready_at

    async def progress(self, **counts: Any) -> None:
        """Publish ``counts`` on the stage's progress topic (``on_progress`` sees them first)."""
        if self._on_progress is not None:
            self._on_progress(counts)
        await publish_progress(self.transport, self.prefix, self.round_id, self.name, **counts)

    def settle(self, messages: Iterable[Message]) -> None:
        """Acknowledge ``messages``: the broker may forget them (they are journaled or were not
        to be kept). Every message is settled, else the broker's window of unacknowledged
        messages fills up and it stops delivering, the downstream's status included."""
        if self._acknowledging is not None:
            for message in messages:
                self._acknowledging.ack(message)

    def _route(self, messages: Sequence[Message], ingress: str) -> list[Message]:
        """The inputs among ``messages``; the others are noted (a downstream status) and
        settled."""
        inputs, others = split_burst(messages, ingress)
        for message in others:
            self._note_other(message)
        self.settle(others)
        return inputs

    def _note_other(self, message: Message) -> None:
        """A message that is not an input: the downstream's status, or the aside's."""
        if self.readiness is not None:
            self.readiness.distrust(connection_epoch(self.transport))
            if self.readiness.note(message):
                return
        if self.aside is not None and self.aside.wants(message.topic):
            self.aside.note(message)

    async def collect(self, intake: Intake, clock: CollectClock) -> bool:
        """Take inputs until ``intake.complete()`` or the clock's closing time; True iff the
        closing time ended it (the deadline passed with the batch incomplete). Past the closing
        time it still takes what keeps arriving, and stops after DRAIN_QUIET seconds without
        any input (at most one more deadline): what was delivered is never left unread."""
        drain_until: float | None = None
        last_input = 0.0
        while not intake.complete():
            now = time.monotonic()
            if clock.progress_due(now):
                await self.progress(**intake.counts())
                if self.aside is not None:
                    await self.aside.tick()
            if clock.expired(now):
                if drain_until is None:
                    drain_until, last_input = now + clock.deadline, now
                end = min(last_input + DRAIN_QUIET, drain_until)
                if now >= end:
                    return True  # quiet, or one more deadline: nothing more is on its way
                message = await self._inbox.get(min(end, clock.next_progress) - now)
                if message is None:
                    continue
            else:
                message = await self._inbox.get(clock.wait(now))
                if message is None:
                    continue
            # Every message that has already arrived, taken together (one thread hop,
            # parallel peeling, one journal fsync for the burst).
            burst = [message, *self._inbox.drain(intake.burst - 1)]
            inputs = self._route(burst, intake.ingress)
            if not inputs:
                continue
            clock.arrived(time.monotonic())
            await intake.take([item.payload for item in inputs])
            self.settle(inputs)
            # Quiet is counted from when this burst was dealt with: what arrived while it was
            # being taken is already waiting in the inbox and is taken next.
            last_input = time.monotonic()
        return False

    async def await_downstream(self, timeout: float, *, who: str) -> None:
        """Return once the downstream is ready (at once if it already is). After ``timeout``
        seconds: announce ``failed`` (``"<downstream> not ready"``) and raise NotReadyError
        saying ``"<who> did not announce ready within <timeout> s ..."``."""
        readiness = self.readiness
        if readiness is None:
            raise RuntimeError(f"{self.name} has no downstream to wait for")
        deadline = time.monotonic() + timeout
        while True:
            # A ready seen before a lost connection no longer counts (Readiness.distrust).
            readiness.distrust(connection_epoch(self.transport))
            if readiness.ready:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                await self.announce("failed", error=f"{readiness.stage} not ready")
                raise NotReadyError(
                    f"{who} did not announce ready within {timeout} s (is it running, on the "
                    f"same broker, with prefix {self.prefix!r}?)"
                )
            message = await self._inbox.get(remaining)
            if message is not None:
                self.settle([message])
                self._note_other(message)

    async def next_message(self, timeout: float) -> Message | None:
        """The next message that is neither the downstream's status (noted) nor the aside's
        (handed to it), or None after ``timeout`` seconds (a client process reads its
        receipts with it)."""
        deadline = time.monotonic() + timeout
        while True:
            message = await self._inbox.get(deadline - time.monotonic())
            if message is None:
                return None
            self.settle([message])
            if self.readiness is not None:
                self.readiness.distrust(connection_epoch(self.transport))
                if self.readiness.note(message):
                    continue
            if self.aside is not None and self.aside.wants(message.topic):
                self.aside.note(message)
                continue
            return message

    async def serve(self, done: Callable[[], bool], timeout: float) -> bool:
        """Keep noting messages and ticking the aside every PROGRESS_INTERVAL until ``done()``
        or ``timeout`` seconds; True iff ``done()`` (hop 0 answers claims after its batch is
        out, until every client process has its final receipt)."""
        give_up = time.monotonic() + timeout
        while True:
            if self.aside is not None:
                await self.aside.tick()
            if done():
                return True
            now = time.monotonic()
            if now >= give_up:
                return False
            until = min(give_up, now + PROGRESS_INTERVAL)
            while (left := until - time.monotonic()) > 0:
                message = await self._inbox.get(left)
                if message is None:
                    break
                self.settle([message])
                self._note_other(message)


async def _deliver(work: Coroutine[Any, Any, T], outcome: asyncio.Future[T]) -> None:
    """Await ``work`` and put its result or error into ``outcome`` (Stage.start)."""
    try:
        result = await work
    except asyncio.CancelledError:
        outcome.cancel()
        raise
    except Exception as exc:
        if not outcome.cancelled():
            outcome.set_exception(exc)
    else:
        if not outcome.cancelled():
            outcome.set_result(result)
