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

from shuffledp.accountant.mechanism import (
    InvalidParameterError,
    require_int,
    require_positive,
)
from shuffledp.clients.client import make_client_messages
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
from shuffledp.randomness import RandomSource, SystemRandom

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
    rng: RandomSource | None = None,
) -> dict[str, Any]:
    """Send one report per value (module docstring); returns ``{"sent", "seconds",
    "randomness"}``. Raises NotReadyError if hop 0 does not announce ready within
    ``settings.ready_timeout`` seconds (then nothing was sent), InvalidParameterError for a
    value outside [0, k) (checked for all values before anything is sent)."""
    source: RandomSource = rng if rng is not None else SystemRandom()
    data = np.asarray(values)
    if data.ndim != 1 or (data.size and not np.issubdtype(data.dtype, np.integer)):
        raise InvalidParameterError(
            f"values must be a 1-d sequence of integers, got shape {data.shape} of {data.dtype}"
        )
    if data.size and (int(data.min()) < 0 or int(data.max()) >= settings.k):
        bad = data[(data < 0) | (data >= settings.k)][0]
        raise InvalidParameterError(f"every value must be in [0, k) = [0, {settings.k}), got {bad}")
    hops = list(hop_public_keys)
    ingress = ingress_topic(settings.prefix, settings.round_id, 0)
    hop0_status = status_topic(settings.prefix, settings.round_id, "hop-0")
    stage = settings.name

    def seal(chunk: npt.NDArray[Any]) -> list[bytes]:
        return make_client_messages(
            chunk,
            k=settings.k,
            eps0=settings.eps0,
            round_id=settings.round_id,
            hop_public_keys=hops,
            analyzer_public_key=analyzer_public_key,
            rng=source,
        )

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
        chunks = [data[i : i + CHUNK] for i in range(0, total, CHUNK)]
        pending = asyncio.create_task(asyncio.to_thread(seal, chunks[0])) if chunks else None
        last_progress = 0.0
        for index in range(len(chunks)):
            assert pending is not None
            messages = await pending
            pending = (
                asyncio.create_task(asyncio.to_thread(seal, chunks[index + 1]))
                if index + 1 < len(chunks)
                else None
            )
            sent += await publish_all(
                transport,
                ((ingress, message) for message in messages),
                max_in_flight=settings.max_in_flight,
            )
            if time.monotonic() - last_progress >= PROGRESS_INTERVAL or sent == total:
                last_progress = time.monotonic()
                await publish_progress(
                    transport, settings.prefix, settings.round_id, stage, sent=sent, total=total
                )
        seconds = time.monotonic() - started
        result = {"sent": sent, "seconds": round(seconds, 6), "randomness": source.name}
        await publish_state(transport, settings.prefix, settings.round_id, stage, "done", **result)
    logger.info("%s round %d: sent %d reports in %.2f s", stage, settings.round_id, sent, seconds)
    return result
