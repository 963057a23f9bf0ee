"""A round's report is written once: what an analyzer does when the round already has one.

The analyzer publishes its report retained on the round's report topic, and it is the only
account allowed to (shuffledp/security/access.py). Before it publishes, it looks at that topic
(it subscribes to it before its ingress, and the broker hands over a retained message before it
acknowledges the next subscription). If a report is already there, it never replaces it:

- if the report it has just built is the same round outcome (:func:`report_identity`: the
  fields in :data:`IDENTITY_FIELDS`; what it re-derives from its journal after a crash between
  publishing and removing the journal), it publishes nothing and returns the report already
  published;
- otherwise (a rerun without the journal counts nothing, a rerun with other arguments derives
  another guarantee) it raises :class:`ReportExistsError`, one line saying what is published
  and what this run counted; the command exits with status 6.

Identity is the outcome, not the bytes: timings, the stages' journal statistics and other
run-dependent fields differ between two derivations of the same round. :data:`IDENTITY_FIELDS`
are those the counts and the manifest determine: the manifest's digest, round, k, eps0,
n_expected, n_received, the
histogram, the rejections by reason, the guarantee and the refusal (``error``).

:class:`ReportWatch` is the stage's aside (:class:`~shuffledp.protocol.stage.Aside`) that keeps
the retained report it sees. Pure: no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from shuffledp.protocol.delivery import EXIT_PUBLISHED, ReportExistsError
from shuffledp.protocol.transport import Message

__all__ = [
    "EXIT_PUBLISHED",
    "IDENTITY_FIELDS",
    "ReportExistsError",
    "ReportWatch",
    "first_report",
    "report_identity",
]

IDENTITY_FIELDS = (
    "manifest",
    "round",
    "k",
    "eps0",
    "n_expected",
    "n_received",
    "histogram",
    "rejected",
    "privacy",
    "error",
)
"""The fields of a published report that make two reports the same round outcome."""


def report_identity(report: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``report`` in :data:`IDENTITY_FIELDS` (absent ones as None)."""
    return {name: report.get(name) for name in IDENTITY_FIELDS}


def _summary(report: dict[str, Any]) -> str:
    """A few words on a report: what it counted, or that it refused the round."""
    received, expected = report.get("n_received"), report.get("n_expected")
    counted = (
        f"{received:,} of {expected:,} received"
        if isinstance(received, int) and isinstance(expected, int)
        else "counts unreadable"
    )
    return f"{counted}, refused" if "error" in report else counted


def first_report(existing: bytes, derived: dict[str, Any], round_id: int) -> dict[str, Any]:
    """What the analyzer of round ``round_id`` does when the report topic already holds
    ``existing`` and it has built ``derived``: the published report (parsed) if ``derived`` is
    the same outcome; else :class:`ReportExistsError`, one line."""
    try:
        published = json.loads(existing.decode())
    except (UnicodeDecodeError, ValueError, RecursionError):
        published = None
    if not isinstance(published, dict):
        raise ReportExistsError(
            f"round {round_id} already has a message on its report topic that is not a report "
            f"({len(existing)} bytes); a round's report is written once: nothing published"
        )
    if report_identity(published) == report_identity(derived):
        return published
    raise ReportExistsError(
        f"round {round_id} already has a published report ({_summary(published)}); this run "
        f"derived another ({_summary(derived)}) and publishes nothing: a round's report is "
        f"written once"
    )


@dataclass(slots=True)
class ReportWatch:
    """The analyzer's aside: keeps the last non-empty message on the report topic ``topic``
    (an empty retained payload is a deletion, not a report)."""

    topic: str
    existing: bytes | None = None

    def wants(self, topic: str) -> bool:
        return topic == self.topic

    def note(self, message: Message) -> None:
        if message.payload:
            self.existing = message.payload

    async def tick(self) -> None:
        """Nothing periodic to do."""
