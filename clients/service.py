"""A client process as a service: many simulated clients, one report each, over a transport.

``await run_clients(transport, settings, values, directory)``: wait until hop 0 announces
``ready`` (an MQTT broker drops what nobody is subscribed to), then for each value: k-RR with
the given randomness source, the fixed-size record, the onion
(:func:`~shuffledp.clients.client.make_client_messages`), and one publish to hop 0's ingress.
Each simulated client sends exactly one report; at most ``max_in_flight`` publishes await their
acknowledgement at once (bounded concurrency). The sealing of the next chunk of clients runs in
a worker thread while the current chunk is published (libsodium releases the GIL). The waiting,
the status and the progress are a :class:`~shuffledp.protocol.stage.Stage`'s; the publishing is
a :class:`ReportPublisher`, which a simulation may wrap (``wrap``: the chaos clients of
:mod:`shuffledp.simulations.pipeline.chaos`).

A PUBACK is not delivery (protocol/receipts.py): with client authentication the process keeps
its sealed reports until hop 0's receipts confirm them, resends what is missing, and raises
ReportsLostError (``lost N of M reports between clients-j and hop-0``) if hop 0's final
receipt still misses some, unless ``accept_loss`` (:mod:`shuffledp.clients.delivery`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from nacl.public import PublicKey

from shuffledp.clients.client import make_client_messages
from shuffledp.clients.delivery import DeliveryOutcome, SentLedger, confirm_delivery
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.client_auth import ProcessCredentials
from shuffledp.protocol.delivery import ReportsLostError, leg_name, loss_line
from shuffledp.protocol.receipts import Claim
from shuffledp.protocol.record import MAX_K, MAX_ROUND_ID, require_manifest_digest
from shuffledp.protocol.stage import PROGRESS_INTERVAL, Stage
from shuffledp.protocol.topics import (
    claim_topic,
    ingress_topic,
    peeler_topic,
    receipt_topic,
    validate_prefix,
)
from shuffledp.protocol.transport import Transport, publish_all
from shuffledp.randomness import RandomLike, RandomSource, as_random_source
from shuffledp.validation import require_int, require_positive

__all__ = [
    "ClientSealer",
    "ClientSettings",
    "Publisher",
    "PublisherWrapper",
    "ReportPublisher",
    "check_values",
    "run_clients",
]

logger = logging.getLogger("shuffledp.clients")

CHUNK = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientSettings:
    """Parameters of one client process for one round (validated on construction).

    ``accept_loss`` (``--accept-loss``): end normally even if hop 0's final receipt shows
    reports lost (else ReportsLostError); ``reclaim_interval`` > 0: seconds between claims
    while hop 0 has not confirmed every report. ``manifest_digest``: the 32-byte digest of the
    round manifest, sealed into every record (the analyzer counts no report of another
    manifest)."""

    prefix: str
    round_id: int
    k: int
    eps0: float
    manifest_digest: bytes
    name: str = "clients-0"
    max_in_flight: int = 128
    ready_timeout: float = 60.0
    accept_loss: bool = False
    reclaim_interval: float = 1.0
    peeler: int | None = None
    """With a hop 0 of several peelers (``--hop-workers``, docs/hop-workers.md): the peeler
    whose topic this process sends to; None: hop 0's own ingress topic."""

    def __post_init__(self) -> None:
        validate_prefix(self.prefix)
        if self.peeler is not None:
            require_int("--peeler", self.peeler, 0, 255)
        require_int("round_id", self.round_id, 0, MAX_ROUND_ID)
        require_int("k", self.k, 2, MAX_K)
        require_positive("eps0", self.eps0)
        require_manifest_digest(self.manifest_digest)
        require_int("max_in_flight", self.max_in_flight, 1, 65535)
        require_positive("ready_timeout", self.ready_timeout)
        require_positive("reclaim_interval", self.reclaim_interval)
        if not isinstance(self.accept_loss, bool):
            raise InvalidParameterError(
                f"--accept-loss must be True or False, got {self.accept_loss!r}"
            )
        if not self.name or not all(c.isalnum() or c in "-_" for c in self.name):
            raise InvalidParameterError(
                f"client process name must be letters, digits, '-' or '_', got {self.name!r}"
            )

    @property
    def ingress(self) -> str:
        """Where this process sends its reports: hop 0's topic, or its peeler's."""
        if self.peeler is None:
            return ingress_topic(self.prefix, self.round_id, 0)
        return peeler_topic(self.prefix, self.round_id, 0, self.peeler)


class Publisher(Protocol):
    """How a client process's reports go out (:class:`ReportPublisher`; a simulation may wrap it
    to misbehave). ``sent``: genuine reports published so far; ``send(messages, last=...)``:
    publish the next sealed chunk (``last``: the process's final one); ``summary()``: fields
    added to run_clients's result."""

    @property
    def sent(self) -> int: ...

    async def send(self, messages: list[bytes], *, last: bool) -> None: ...

    def summary(self) -> dict[str, Any]: ...


class ReportPublisher:
    """Publishes reports to hop 0's ingress ``topic``, at most ``max_in_flight`` awaiting their
    acknowledgement at once, and if ``rate`` is given at most that many per second counted from
    ``started`` (monotonic); ``sent`` counts the reports published."""

    def __init__(
        self,
        transport: Transport,
        topic: str,
        *,
        max_in_flight: int,
        rate: float | None = None,
        started: float,
    ) -> None:
        self.transport = transport
        self.topic = topic
        self.max_in_flight = max_in_flight
        self.rate = rate
        self.started = started
        self.sent = 0

    async def send(self, messages: list[bytes], *, last: bool = False) -> None:
        """Publish ``messages`` as reports (paced if ``rate``)."""
        if self.rate is None:
            await self.publish(messages)
            return
        step = max(1, int(self.rate / 10))  # slices of a tenth of a second's worth, on schedule
        for first in range(0, len(messages), step):
            await asyncio.sleep(max(0.0, self.started + self.sent / self.rate - time.monotonic()))
            await self.publish(messages[first : first + step])

    async def publish(
        self, messages: Sequence[bytes], *, counted: bool = True, max_in_flight: int | None = None
    ) -> None:
        """Publish ``messages`` at once (never paced); ``counted``: they are reports."""
        published = await publish_all(
            self.transport,
            ((self.topic, message) for message in messages),
            max_in_flight=self.max_in_flight if max_in_flight is None else max_in_flight,
        )
        if counted:
            self.sent += published

    def summary(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientSealer:
    """Seals the reports of this process's clients: k-RR with ``rng``, the fixed-size record,
    the onion (:func:`~shuffledp.clients.client.make_client_messages`); with ``credentials``
    client ``start + i`` reports the i-th value of a chunk, in its authenticator envelope."""

    settings: ClientSettings
    hop_public_keys: Sequence[PublicKey]
    analyzer_public_key: PublicKey
    rng: RandomSource
    credentials: ProcessCredentials | None

    def seal(self, start: int, chunk: npt.NDArray[Any], round_id: int | None = None) -> list[bytes]:
        """The messages of clients ``start``, ``start + 1``, ... for ``chunk``, tagged for
        ``round_id`` (default: the settings' round)."""
        credentials = self.credentials
        return make_client_messages(
            chunk,
            k=self.settings.k,
            eps0=self.settings.eps0,
            round_id=self.settings.round_id if round_id is None else round_id,
            manifest_digest=self.settings.manifest_digest,
            hop_public_keys=self.hop_public_keys,
            analyzer_public_key=self.analyzer_public_key,
            rng=self.rng,
            credentials=None
            if credentials is None
            else [credentials.credential(start + i) for i in range(len(chunk))],
        )


PublisherWrapper = Callable[[ReportPublisher, ClientSealer], Publisher]
"""Makes the publisher a process sends through from the plain one and the process's sealer
(simulations only: :mod:`shuffledp.simulations.pipeline.chaos`)."""


def check_values(values: npt.ArrayLike, k: int) -> npt.NDArray[Any]:
    """``values`` as an array, or InvalidParameterError unless it is 1-d, of integers in [0, k)."""
    data = np.asarray(values)
    if data.ndim != 1 or (data.size and not np.issubdtype(data.dtype, np.integer)):
        raise InvalidParameterError(
            f"values must be a 1-d sequence of integers, got shape {data.shape} of {data.dtype}"
        )
    if data.size and (int(data.min()) < 0 or int(data.max()) >= k):
        bad = data[(data < 0) | (data >= k)][0]
        raise InvalidParameterError(f"every value must be in [0, k) = [0, {k}), got {bad}")
    return data


async def run_clients(
    transport: Transport,
    settings: ClientSettings,
    values: npt.ArrayLike,
    *,
    hop_public_keys: Sequence[PublicKey],
    analyzer_public_key: PublicKey,
    rng: RandomLike = None,
    credentials: ProcessCredentials | None = None,
    rate: float | None = None,
    wrap: PublisherWrapper | None = None,
) -> dict[str, Any]:
    """Send one report per value (module docstring); returns ``{"sent", "seconds",
    "randomness", "authenticated"}``. With ``credentials`` (client authentication) the i-th
    value is reported by this process's i-th client, in its authenticator envelope.

    ``rate`` (simulations only): send at most that many reports per second (a slow client
    population; default: as fast as possible). ``wrap`` (simulations only): send through
    ``wrap(publisher, sealer)`` instead of the plain publisher; its ``summary()`` is added to
    the result.

    NotReadyError if hop 0 does not announce ready within ``settings.ready_timeout`` seconds
    (nothing sent then), InvalidParameterError for a value outside [0, k) (all checked before
    anything is sent) or a bad rate."""
    data = check_values(values, settings.k)
    if rate is not None:
        require_positive("rate", rate)
    sealer = ClientSealer(
        settings=settings,
        hop_public_keys=list(hop_public_keys),
        analyzer_public_key=analyzer_public_key,
        rng=as_random_source(rng),
        credentials=credentials,
    )
    name = settings.name
    async with Stage(
        transport,
        prefix=settings.prefix,
        round_id=settings.round_id,
        name=name,
        downstream="hop-0",
    ) as stage:
        await _await_hop_0(stage, settings, authenticated=credentials is not None)
        started = time.monotonic()
        publisher = _publisher(transport, settings, sealer, rate=rate, started=started, wrap=wrap)
        ledger = SentLedger(int(data.size))  # spilled to a temporary file
        try:
            await _send_all(stage, sealer, publisher, data, ledger)
            seconds = time.monotonic() - started
            delivery = await _deliver(stage, settings, ledger, credentials)
        finally:
            ledger.close()
        result = _sent_summary(publisher, seconds, sealer, authenticated=credentials is not None)
        await _conclude(stage, settings, result, delivery)
    logger.info(
        "%s round %d: sent %d reports in %.2f s", name, settings.round_id, publisher.sent, seconds
    )
    return result


def _sent_summary(
    publisher: Publisher, seconds: float, sealer: ClientSealer, *, authenticated: bool
) -> dict[str, Any]:
    """What run_clients returns (and announces with ``done``): ``sent``, ``seconds``,
    ``randomness``, ``authenticated`` and the publisher's own summary."""
    return {
        "sent": publisher.sent,
        "seconds": round(seconds, 6),
        "randomness": sealer.rng.name,
        "authenticated": authenticated,
        **publisher.summary(),
    }


async def _await_hop_0(stage: Stage, settings: ClientSettings, *, authenticated: bool) -> None:
    """Announce ``waiting``, wait until hop 0 is ready, announce ``working``; with client
    authentication first subscribe to hop 0's receipts (it answers claims with them,
    clients/delivery.py). NotReadyError after ``settings.ready_timeout`` seconds."""
    if authenticated:
        await stage.subscribe(receipt_topic(settings.prefix, settings.round_id, settings.name))
    await stage.announce("waiting")
    await stage.await_downstream(
        settings.ready_timeout, who=f"{settings.name}: hop-0 of round {settings.round_id}"
    )
    await stage.announce("working")


def _publisher(
    transport: Transport,
    settings: ClientSettings,
    sealer: ClientSealer,
    *,
    rate: float | None,
    started: float,
    wrap: PublisherWrapper | None,
) -> Publisher:
    """The publisher to hop 0's ingress topic, wrapped by ``wrap`` if given (simulations)."""
    ingress = settings.ingress
    plain = ReportPublisher(
        transport, ingress, max_in_flight=settings.max_in_flight, rate=rate, started=started
    )
    return plain if wrap is None else wrap(plain, sealer)


async def _conclude(
    stage: Stage, settings: ClientSettings, result: dict[str, Any], delivery: DeliveryOutcome | None
) -> None:
    """Announce ``done`` with ``result`` (and the delivery's outcome), or, if hop 0's final
    receipt misses reports and the loss is not accepted, ``failed`` and ReportsLostError with
    the loss's one line."""
    if delivery is not None:
        result["delivery"] = delivery.to_json()
        if delivery.lost and not settings.accept_loss:
            line = loss_line(delivery.lost, delivery.sent, leg_name(settings.name, "hop-0"))
            await stage.announce("failed", error=line, **result)
            raise ReportsLostError(line)
    await stage.announce("done", **result)


async def _deliver(
    stage: Stage,
    settings: ClientSettings,
    ledger: SentLedger,
    credentials: ProcessCredentials | None,
) -> DeliveryOutcome | None:
    """With client authentication: claims, receipts and resends until hop 0's answer is
    known (clients/delivery.py). Without: one claim saying what was sent (hop 0 counts it for
    its accounting; it cannot tell whose reports it took, so it sends no receipts)."""
    prefix, round_id, name = settings.prefix, settings.round_id, settings.name
    claim_at = claim_topic(prefix, round_id, name)
    if credentials is None:
        claim = Claim(seq=1, clients=ledger.clients, sent=ledger.sent, confirmed=True)
        await stage.transport.publish(claim_at, claim.encode())
        return None
    return await confirm_delivery(
        stage,
        ledger,
        process=credentials.process,
        topics=(
            claim_at,
            receipt_topic(prefix, round_id, name),
            settings.ingress,
        ),
        max_in_flight=settings.max_in_flight,
        reclaim_interval=settings.reclaim_interval,
        away_timeout=settings.ready_timeout,
    )


async def _send_all(
    stage: Stage,
    sealer: ClientSealer,
    publisher: Publisher,
    data: npt.NDArray[Any],
    ledger: SentLedger,
) -> None:
    """Seal chunk i + 1 in a worker thread while chunk i is published; progress at most every
    PROGRESS_INTERVAL seconds, and once everything is sent."""
    total = int(data.size)
    starts = list(range(0, total, CHUNK))
    chunks = [data[i : i + CHUNK] for i in starts]

    def seal_ahead(index: int) -> asyncio.Future[list[bytes]] | None:
        if index >= len(chunks):
            return None
        work = asyncio.to_thread(sealer.seal, starts[index], chunks[index])
        return stage.start(work, name=f"{stage.name}-seal-{index}")

    pending = seal_ahead(0)
    last_progress = 0.0
    for index in range(len(chunks)):
        assert pending is not None
        messages = await pending
        ledger.record(starts[index], messages)  # kept until hop 0 confirms them
        pending = seal_ahead(index + 1)
        await publisher.send(messages, last=index + 1 == len(chunks))
        sent = publisher.sent
        if time.monotonic() - last_progress >= PROGRESS_INTERVAL or sent == total:
            last_progress = time.monotonic()
            await stage.progress(sent=sent, total=total)
