"""A misbehaving client process for `shuffledp simulate --chaos` (and `shuffledp clients --chaos M`):
the production client (:func:`~shuffledp.clients.service.run_clients`) with its publisher
wrapped, so that no line of chaos lives in the client itself.

:class:`ChaosPublisher` wraps the process's :class:`~shuffledp.clients.service.ReportPublisher`:
it passes every genuine report through, keeps the genuine messages of the first chunk as sources,
holds back the process's very last report, and sends ``count`` hostile messages
(:mod:`~shuffledp.simulations.pipeline.chaos_messages`) just before it. Sent after the genuine
messages they derive from and before the last report, they reach hop 0 while its batch is not
yet full, so hop 0 counts every one under its known reason. The process's result then has
``injected`` (by kind) and ``expected_rejections`` (by reason, at hop 0).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import numpy.typing as npt
from nacl.public import PublicKey

from shuffledp.clients.service import (
    ClientSealer,
    ClientSettings,
    Publisher,
    ReportPublisher,
    check_values,
    run_clients,
)
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.client_auth import ProcessCredentials
from shuffledp.protocol.transport import Transport
from shuffledp.randomness import RandomLike
from shuffledp.simulations.pipeline.chaos_messages import ChaosBatch, make_chaos_messages
from shuffledp.validation import require_int, require_positive

__all__ = ["ChaosPublisher", "run_chaos_clients"]


class ChaosPublisher:
    """A :class:`~shuffledp.clients.service.Publisher` that injects ``count`` hostile messages
    before the last genuine report (module docstring). ``fresh_report(i, old_round)``: a new
    authentic message of the client that sent the i-th genuine message (another round's if
    ``old_round``)."""

    def __init__(
        self, inner: ReportPublisher, *, count: int, fresh_report: Callable[[int, bool], bytes]
    ) -> None:
        self.inner = inner
        self.count = count
        self.fresh_report = fresh_report
        self.sources: list[bytes] = []
        self.batch: ChaosBatch | None = None

    @property
    def sent(self) -> int:
        return self.inner.sent

    async def send(self, messages: list[bytes], *, last: bool) -> None:
        held_back: list[bytes] = []
        if last:
            messages, held_back = messages[:-1], messages[-1:]
        await self.inner.send(messages, last=False)
        if not self.sources:
            self.sources = list(messages)
        if held_back:
            self.batch = await asyncio.to_thread(
                make_chaos_messages,
                genuine=self.sources,
                count=self.count,
                fresh_report=self.fresh_report,
            )
            await self.inner.publish(self.batch.messages, counted=False)
            await self.inner.publish(held_back, max_in_flight=1)

    def summary(self) -> dict[str, Any]:
        if self.batch is None:
            return {}
        return {
            "injected": self.batch.injected,
            "expected_rejections": self.batch.expected_rejections,
        }


async def run_chaos_clients(
    transport: Transport,
    settings: ClientSettings,
    values: npt.ArrayLike,
    *,
    hop_public_keys: Sequence[PublicKey],
    analyzer_public_key: PublicKey,
    chaos: int,
    rng: RandomLike = None,
    credentials: ProcessCredentials | None = None,
    rate: float | None = None,
) -> dict[str, Any]:
    """:func:`~shuffledp.clients.service.run_clients` that also injects ``chaos`` hostile
    messages (module docstring). InvalidParameterError, before anything is sent, for chaos < 0,
    without ``credentials`` (without client authentication a second report would be taken as a
    report) or with fewer than 2 values."""
    data = check_values(values, settings.k)  # the checks in run_clients's order
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
    # Another round for "old-round" reports: the previous one (or the next, for round 0).
    other_round = settings.round_id - 1 if settings.round_id > 0 else settings.round_id + 1

    def wrap(inner: ReportPublisher, sealer: ClientSealer) -> Publisher:
        def fresh_report(index: int, old_round: bool) -> bytes:
            """A new authentic message of client ``index`` (it already reported)."""
            chunk = data[index : index + 1]
            return sealer.seal(index, chunk, other_round if old_round else None)[0]

        return ChaosPublisher(inner, count=chaos, fresh_report=fresh_report) if chaos else inner

    return await run_clients(
        transport,
        settings,
        data,
        hop_public_keys=hop_public_keys,
        analyzer_public_key=analyzer_public_key,
        rng=rng,
        credentials=credentials,
        rate=rate,
        wrap=wrap,
    )
