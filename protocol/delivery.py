"""Loud accounting: how a stage says that genuine reports were not counted (pure core).

Every stage compares what it should have with what it has: hop 0 the round's expected reports
(every enrolled client) with what it accepted, a later hop and the analyzer what the upstream
says it forwarded (its END frame's count) with what they accepted. A shortfall is a loss,
stated in one line by :func:`loss_line`, e.g. ``lost 1,613 of 20,000 reports between clients
and hop-0``. Unless the stage was told to accept it (``accept_loss``, the ``--accept-loss``
flag), the round is refused with that line (nothing smaller than asked is ever published
unknowingly), and the command exits with :data:`EXIT_LOST`.

What a stage after hop 0 rejects is split in two. Its input comes in frames signed by its
upstream hop (protocol/frames.py), so every message in them was sent by that hop, which counted
it as forwarded. A message refused as ``wrong-length`` (no honest hop forwards one: its output
length is fixed), ``duplicate`` (a copy: an honest hop forwards every accepted message once),
``batch-full`` (the stage's batch was already full: too small an expected size) or
``decryption-failed`` (its layer does not open) is a report the round lost, counted as lost and
named by reason (:data:`GENUINE_LOSS_REASONS`, :func:`screened`). Were a copy or a wrong-length
message screened out instead, a hop could drop reports unseen by forwarding junk in their place.
The price: a client that seals garbage, or the same inner onion twice, inside valid outer
layers (the hops cannot tell it from a hop's doing) makes the round refuse for a loss; that is
loud, not silent. What the analyzer rejects for a record's fields (``bad-version``,
``wrong-manifest``, ``wrong-round``, ``value-out-of-range``: the content a client sealed) is
screened out: accounted for, not lost. What hop 0 rejects is never a genuine report.
"""

from __future__ import annotations

from collections.abc import Mapping

from shuffledp.errors import OperationalError
from shuffledp.protocol.errors import DecryptionFailed, Duplicate, WrongLength

__all__ = [
    "EXIT_LOST",
    "EXIT_PUBLISHED",
    "GENUINE_LOSS_REASONS",
    "ReportExistsError",
    "ReportsLostError",
    "leg_name",
    "loss_line",
    "loss_reasons",
    "screened",
]

GENUINE_LOSS_REASONS: tuple[str, ...] = (
    WrongLength.reason,
    Duplicate.reason,
    "batch-full",
    DecryptionFailed.reason,
)
"""At a stage after hop 0, rejections that are reports lost, not junk screened out (module
docstring), in the order the checks run; ``batch-full`` is shuffler.hop.BATCH_FULL (the
protocol cannot import it)."""

EXIT_LOST = 5
"""Exit status of a stage command (and of ``simulate``) when genuine reports were lost and
``--accept-loss`` was not given."""


EXIT_PUBLISHED = 6
"""Exit status of an analyzer that found its round's report already published and derived
another outcome: it published nothing (a round's report is written once,
:mod:`shuffledp.analyzer.published`)."""


class ReportsLostError(OperationalError):
    """Genuine reports were not counted and the loss was not accepted (``--accept-loss``); the
    message is the one-line :func:`loss_line`."""


class ReportExistsError(OperationalError):
    """The round's report is already published and this run derived another one; nothing was
    published (exit status :data:`EXIT_PUBLISHED`)."""


def leg_name(source: str, sink: str) -> str:
    """``"between SOURCE and SINK"``."""
    return f"between {source} and {sink}"


def loss_line(lost: int, of: int, where: str, detail: str = "") -> str:
    """``lost L of N reports WHERE`` (thousands separated), then `` (DETAIL)`` if given."""
    line = f"lost {lost:,} of {of:,} reports {where}"
    return f"{line} ({detail})" if detail else line


def _counts(rejected: Mapping[str, object]) -> dict[str, int]:
    return {
        str(reason): count
        for reason, count in rejected.items()
        if isinstance(count, int) and not isinstance(count, bool) and count > 0
    }


def screened(rejected: Mapping[str, object]) -> int:
    """The rejections of a stage after hop 0 that are accounted for (every reason but
    :data:`GENUINE_LOSS_REASONS`; unreadable counts are 0)."""
    counts = _counts(rejected)
    return sum(count for reason, count in counts.items() if reason not in GENUINE_LOSS_REASONS)


def loss_reasons(rejected: Mapping[str, object]) -> str:
    """``"batch-full 500, decryption-failed 3"``: the genuine-loss reasons a stage after hop 0
    counted (empty if none)."""
    counts = _counts(rejected)
    return ", ".join(
        f"{reason} {counts[reason]:,}" for reason in GENUINE_LOSS_REASONS if reason in counts
    )
