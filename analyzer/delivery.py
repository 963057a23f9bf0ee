"""The round's accounting from every stage's round log (pure core): where reports were lost.

The analyzer receives the hops' round logs in the last hop's END frame, each in that hop's
signed statement, and verifies the whole chain of them first (protocol/end_chain.py): the logs
given here are what each hop signed. Each hop says what it accepted and forwarded (hop 0 also
what the client processes claimed to have sent), so the round's delivery is a chain of legs,
each compared on its own::

    clients --(expected)--> hop-0 --(forwarded)--> hop-1 ... --> analyzer (counted)

:func:`account_delivery` builds the :class:`~shuffledp.analyzer.records.Delivery` of the
published report from it: a leg per stage that ran (a hop without a log, whose batch never
came, is skipped: the leg spans it), ending at the first stage that refused the round. Its
``message`` is the loss's one line (``lost 1,613 of 20,000 reports between clients and
hop-0``); several legs with losses are listed one after the other.

Each stage after hop 0 takes its input in frames its upstream hop signed, so a message it
refuses as ``wrong-length``, ``duplicate``, ``batch-full`` or ``decryption-failed`` is a report
lost on that leg, not junk screened out (protocol/delivery.py, ``GENUINE_LOSS_REASONS``): a
leg's ``rejected`` counts only the other reasons, and the loss's line names these, e.g. ``lost
500 of 2,000 reports between hop-0 and hop-1 (batch-full 500)``. A hop of several processes
(docs/hop-workers.md) is one stage here, its mixer's log; the line then also carries the
mixer's own line, which names the peeler (``hop-0's mixer: lost 10 of 50 reports between
clients and hop-0-p1``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shuffledp.analyzer.records import Delivery, DeliveryLeg
from shuffledp.protocol.delivery import leg_name, loss_line, loss_reasons, screened

__all__ = ["account_delivery"]


def _count(log: Mapping[str, Any], key: str) -> int | None:
    value = log.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _rejected(log: object) -> Mapping[str, Any]:
    """A stage's ``rejected`` counters (empty if unreadable)."""
    counts = log.get("rejected") if isinstance(log, Mapping) else None
    return counts if isinstance(counts, Mapping) else {}


def _detail(log: object, *, first: bool) -> str:
    """What a leg's loss line adds: the genuine-loss reasons of its sink (not for the first
    leg: hop 0 rejects no genuine report) and, for a hop of several processes, its mixer's own
    line naming the process where the reports went missing (docs/hop-workers.md)."""
    parts = [] if first else [loss_reasons(_rejected(log))]
    if isinstance(log, Mapping) and isinstance(log.get("workers"), Mapping) and log.get("loss"):
        parts.append(f"{log.get('stage', 'the hop')}'s mixer: {log['loss']}")
    return "; ".join(p for p in parts if p)


def account_delivery(
    *,
    expected: int,
    stages: Mapping[str, Any],
    n_hops: int,
    received: int,
    rejected: int,
    accept_loss: bool,
) -> Delivery:
    """The Delivery of a round of ``expected`` reports whose analyzer counted ``received``
    and screened out ``rejected`` messages (its rejections but the genuine-loss reasons), from
    the hops' logs in ``stages`` (module docstring; the analyzer's own log, if there, names the
    reasons of its loss). ``accept_loss``: the loss, if any, is published knowingly."""
    legs: list[DeliveryLeg] = []
    source, sent = "clients", expected
    clients_sent: int | None = None
    refused = False
    for index in range(n_hops):
        log = stages.get(f"hop-{index}")
        accepted = _count(log, "accepted") if isinstance(log, Mapping) else None
        if not isinstance(log, Mapping) or accepted is None:
            continue
        if index == 0:
            clients_sent = _count(log, "clients_sent")
        sink = f"hop-{index}"
        accounted = screened(_rejected(log)) if legs else 0  # hop 0 rejects no genuine report
        legs.append(
            DeliveryLeg(source=source, sink=sink, sent=sent, counted=accepted, rejected=accounted)
        )
        forwarded = _count(log, "forwarded") or 0
        if forwarded == 0 and accepted > 0:  # it refused the round: nothing went further
            refused = True
            break
        source, sent = sink, forwarded
    if not refused:
        legs.append(
            DeliveryLeg(
                source=source, sink="analyzer", sent=sent, counted=received, rejected=rejected
            )
        )
    lost = sum(leg.lost for leg in legs)
    lines = [
        loss_line(
            leg.lost,
            leg.sent,
            leg_name(leg.source, leg.sink),
            _detail(stages.get(leg.sink), first=index == 0),
        )
        for index, leg in enumerate(legs)
        if leg.lost
    ]
    if lines and clients_sent is not None and legs[0].lost:
        lines[0] += f" (the client processes said they sent {clients_sent:,})"
    return Delivery(
        expected=expected,
        counted=legs[-1].counted,
        lost=lost,
        legs=tuple(legs),
        clients_sent=clients_sent,
        loss_accepted=accept_loss and lost > 0,
        message="; ".join(lines) if lines else None,
    )
