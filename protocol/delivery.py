"""Loud accounting: how a stage says that genuine reports were not counted (pure core).

Every stage compares what it should have with what it has: hop 0 the round's expected reports
(every enrolled client) with what it accepted, a later hop and the analyzer what the upstream
says it forwarded (its END frame's count) with what they accepted. A shortfall is a loss,
stated in one line by :func:`loss_line`, e.g. ``lost 1,613 of 20,000 reports between clients
and hop-0``. Unless the stage was told to accept it (``accept_loss``, the ``--accept-loss``
flag), the round is refused with that line (nothing smaller than asked is ever published
unknowingly), and the command exits with :data:`EXIT_LOST`.
"""

from __future__ import annotations

from shuffledp.errors import OperationalError

__all__ = [
    "EXIT_LOST",
    "EXIT_PUBLISHED",
    "ReportExistsError",
    "ReportsLostError",
    "leg_name",
    "loss_line",
]

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
