"""A client process as a service: many simulated clients, one report each, over a transport.

``await run_clients(transport, settings, values, directory)``: wait until hop 0 announces
``ready`` (an MQTT broker drops what nobody is subscribed to), then for each value: k-RR with
the given randomness source, the fixed-size record, the onion
(:func:`~shuffledp.clients.client.make_client_messages`), and one publish to hop 0's ingress.
Each simulated client sends exactly one report; at most ``max_in_flight`` publishes await their
acknowledgement at once (bounded concurrency). The sealing of the next chunk of clients runs in
a worker thread while the current chunk is published (libsodium releases the GIL).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from nacl.public import PublicKey

from shuffledp.clients.chaos import ChaosBatch, make_chaos_messages
from shuffledp.clients.client import make_client_messages
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.client_auth import ProcessCredentials
from shuffledp.protocol.record import MAX_K, MAX_ROUND_ID
from shuffledp.protocol.runtime import (
    READY_STATES,
    Inbox,
    NotReadyError,
    decode_json,
    publish_progress,
    publish_state,
    retained_status,
)
from shuffledp.protocol.topics import ingress_topic, status_topic, validate_prefix
from shuffledp.protocol.transport import Transport, publish_all
from shuffledp.randomness import RandomLike, RandomSource, as_random_source
from shuffledp.validation import require_int, require_positive

__all__ = ["ClientSettings", "run_clients"]

logger = logging.getLogger("shuffledp.clients")

CHUNK = 1000
PROGRESS_INTERVAL = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientSettings:
    """Parameters of one client process for one round (validated on construction)."""

    prefix: str
    round_id: int
    k: int
    eps0: float
    name: str = "clients-0"
    max_in_flight: int = 128
    ready_timeout: float = 60.0

    def __post_init__(self) -> None:
        validate_prefix(self.prefix)
        require_int("round_id", self.round_id, 0, MAX_ROUND_ID)
        require_int("k", self.k, 2, MAX_K)
        require_positive("eps0", self.eps0)
        require_int("max_in_flight", self.max_in_flight, 1, 65535)
        require_positive("ready_timeout", self.ready_timeout)
        if not self.name or not all(c.isalnum() or c in "-_" for c in self.name):
            raise InvalidParameterError(
                f"client process name must be letters, digits, '-' or '_', got {self.name!r}"
            )


async def run_clients(
    transport: Transport,
    settings: ClientSettings,
    values: npt.ArrayLike,
    *,
    hop_public_keys: Sequence[PublicKey],
    analyzer_public_key: PublicKey,
    rng: RandomLike = None,
    credentials: ProcessCredentials | None = None,
    chaos: int = 0,
    rate: float | None = None,
) -> dict[str, Any]:
    """Send one report per value (module docstring); returns ``{"sent", "seconds",
    "randomness", "authenticated"}``. With ``credentials`` (client authentication) the i-th
    value is reported by this process's i-th client, in its authenticator envelope.

    ``chaos`` > 0 (needs ``credentials``; simulations only): also inject that many hostile
    messages (:mod:`shuffledp.clients.chaos`) after the genuine reports they derive from and
    before this process's last report; the result then has ``injected`` (by kind) and
    ``expected_rejections`` (by reason, at hop 0). ``rate`` (simulations only): send at most
    that many reports per second (a slow client population; default: as fast as possible).

    Raises NotReadyError if hop 0 does not announce ready within ``settings.ready_timeout``
    seconds (then nothing was sent), InvalidParameterError for a value outside [0, k) (checked
    for all values before anything is sent) or bad chaos/rate parameters."""
    source: RandomSource = as_random_source(rng)
    data = np.asarray(values)
    if data.ndim != 1 or (data.size and not np.issubdtype(data.dtype, np.integer)):
        raise InvalidParameterError(
            f"values must be a 1-d sequence of integers, got shape {data.shape} of {data.dtype}"
        )
    if data.size and (int(data.min()) < 0 or int(data.max()) >= settings.k):
        bad = data[(data < 0) | (data >= settings.k)][0]
        raise InvalidParameterError(f"every value must be in [0, k) = [0, {settings.k}), got {bad}")
    require_int("chaos", chaos, 0)
    if rate is not None:
        require_positive("rate", rate)
    if chaos and credentials is None:
        raise InvalidParameterError(
            "chaos needs client authentication (credentials): without it injected second "
            "reports would be taken as reports"
        )
    if chaos and data.size < 2:
        raise InvalidParameterError(
            f"chaos needs a process hosting at least 2 clients, got {data.size}"
        )
    hops = list(hop_public_keys)
    ingress = ingress_topic(settings.prefix, settings.round_id, 0)
    hop0_status = status_topic(settings.prefix, settings.round_id, "hop-0")
    stage = settings.name

    def seal(start: int, chunk: npt.NDArray[Any], round_id: int | None = None) -> list[bytes]:
        return make_client_messages(
            chunk,
            k=settings.k,
            eps0=settings.eps0,
            round_id=settings.round_id if round_id is None else round_id,
            hop_public_keys=hops,
            analyzer_public_key=analyzer_public_key,
            rng=source,
            credentials=None
            if credentials is None
            else [credentials.credential(start + i) for i in range(len(chunk))],
        )

    # Another round for chaos "old-round" reports: the previous one (or the next, for round 0).
    other_round = settings.round_id - 1 if settings.round_id > 0 else settings.round_id + 1

    def fresh_report(index: int, old_round: bool) -> bytes:
        """A new authentic message of client ``index`` (it already reported: chaos only)."""
        return seal(index, data[index : index + 1], other_round if old_round else None)[0]

    async with (
        Inbox(transport, name=f"{stage}-inbox") as inbox,
        retained_status(transport, settings.prefix, settings.round_id, stage),
    ):
        await transport.subscribe(hop0_status)
        await publish_state(transport, settings.prefix, settings.round_id, stage, "waiting")
        waited = time.monotonic()
        while True:
            remaining = settings.ready_timeout - (time.monotonic() - waited)
            if remaining <= 0:
                await publish_state(
                    transport,
                    settings.prefix,
                    settings.round_id,
                    stage,
                    "failed",
                    error="hop-0 not ready",
                )
                raise NotReadyError(
                    f"{stage}: hop-0 of round {settings.round_id} did not announce ready within "
                    f"{settings.ready_timeout} s (is it running, on the same broker, with prefix "
                    f"{settings.prefix!r}?)"
                )
            message = await inbox.get(remaining)
            if message is None or message.topic != hop0_status:
                continue
            body = decode_json(message.payload)
            if body is not None and body.get("state") in READY_STATES:
                break
        await publish_state(transport, settings.prefix, settings.round_id, stage, "working")
        started = time.monotonic()
        total = int(data.size)
        sent = 0
        starts = list(range(0, total, CHUNK))
        chunks = [data[i : i + CHUNK] for i in starts]
        pending = asyncio.create_task(asyncio.to_thread(seal, 0, chunks[0])) if chunks else None
        last_progress = 0.0
        sources: list[bytes] = []
        chaos_batch: ChaosBatch | None = None
        for index in range(len(chunks)):
            assert pending is not None
            messages = await pending
            pending = (
                asyncio.create_task(asyncio.to_thread(seal, starts[index + 1], chunks[index + 1]))
                if index + 1 < len(chunks)
                else None
            )
            held_back: list[bytes] = []
            if chaos and index + 1 == len(chunks):
                messages, held_back = messages[:-1], messages[-1:]
            if rate is None:
                sent += await publish_all(
                    transport,
                    ((ingress, message) for message in messages),
                    max_in_flight=settings.max_in_flight,
                )
            else:  # paced: slices of a tenth of a second's worth, each on schedule
                step = max(1, int(rate / 10))
                for first in range(0, len(messages), step):
                    await asyncio.sleep(max(0.0, started + sent / rate - time.monotonic()))
                    sent += await publish_all(
                        transport,
                        ((ingress, m) for m in messages[first : first + step]),
                        max_in_flight=settings.max_in_flight,
                    )
            if chaos and not sources:
                sources = list(messages)
            if held_back:
                chaos_batch = await asyncio.to_thread(
                    make_chaos_messages, genuine=sources, count=chaos, fresh_report=fresh_report
                )
                await publish_all(
                    transport,
                    ((ingress, message) for message in chaos_batch.messages),
                    max_in_flight=settings.max_in_flight,
                )
                sent += await publish_all(
                    transport, ((ingress, m) for m in held_back), max_in_flight=1
                )
            if time.monotonic() - last_progress >= PROGRESS_INTERVAL or sent == total:
                last_progress = time.monotonic()
                await publish_progress(
                    transport, settings.prefix, settings.round_id, stage, sent=sent, total=total
                )
        seconds = time.monotonic() - started
        result = {
            "sent": sent,
            "seconds": round(seconds, 6),
            "randomness": source.name,
            "authenticated": credentials is not None,
        }
        if chaos_batch is not None:
            result["injected"] = chaos_batch.injected
            result["expected_rejections"] = chaos_batch.expected_rejections
        await publish_state(transport, settings.prefix, settings.round_id, stage, "done", **result)
    logger.info("%s round %d: sent %d reports in %.2f s", stage, settings.round_id, sent, seconds)
    return result
