"""One row of the fault bench: what a scenario sent, what the published report counted, where the
rest went, how the run ended, and the verdict.

:class:`FaultRow` is frozen, validated when built, and ``FaultRow.from_json(row.to_json()) ==
row``. :func:`judge` gives the verdict from the measured figures (docs/faults.md, "Fault
bench"):

- ``OK`` when every genuine report was counted exactly once and the analyzer exited 0;
- ``OK`` too when a report is missing, the scenario is one where nothing can repair the loss
  (``unrepairable``: a client process killed before it handed its reports over, a journal
  corrupted on disk), and a component exited non-zero with a one-line message naming the loss;
- ``FAIL`` otherwise, with the reason: ``silent loss`` (exit 0, counted < sent), ``counted
  twice`` (counted > sent), ``crash`` (a traceback), ``no report``, or ``loud loss, but
  repairable``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shuffledp.errors import InvalidParameterError
from shuffledp.validation import (
    JsonObject,
    json_input,
    optional,
    require_int,
    require_integer,
    require_json_object,
    require_keys,
    require_number,
    require_str,
)

__all__ = ["VERDICTS", "FaultRow", "judge", "names_the_loss"]

VERDICTS = ("OK", "FAIL")

#: Words that make an error message "name the loss" (a count and where, or a refusal).
_LOSS_WORDS = re.compile(r"\b(lost|loss|missing|not counted|corrupt\w*|refus\w*)\b", re.I)


def names_the_loss(message: str) -> bool:
    """True iff ``message`` is a one-line error naming a loss: no traceback, and one of the
    words of a loss (lost, loss, missing, not counted, corrupt, refused)."""
    return bool(message) and "Traceback" not in message and bool(_LOSS_WORDS.search(message))


def judge(
    *,
    sent: int,
    counted: int,
    exit_status: int | None,
    other_exits: Mapping[str, int],
    message: str,
    unrepairable: bool,
) -> tuple[str, str]:
    """(verdict, why) of a row (module docstring)."""
    loud = (exit_status not in (None, 0) or bool(other_exits)) and names_the_loss(message)
    if counted == sent and exit_status == 0:
        return "OK", "every report counted once"
    if counted > sent:
        return "FAIL", f"counted twice ({counted - sent} more than sent)"
    if counted < sent and loud:
        if unrepairable:
            return "OK", "loud loss where nothing can repair it"
        return "FAIL", "loud loss, but repairable"
    if "Traceback" in message:
        return "FAIL", "crash"
    if exit_status is None:
        return "FAIL", "no report"
    if counted < sent and exit_status == 0:
        return "FAIL", "silent loss"
    return "FAIL", f"exit {exit_status} without naming a loss"


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultRow:
    """One scenario's outcome. ``sent``: genuine reports the client processes were given;
    ``counted``: genuine reports in the published report (``n_received`` less any accepted
    attacker report); ``duplicates``: rejections as duplicates anywhere (``duplicate``,
    ``duplicate-frame``, ``client-already-reported``); ``lost_at``: reports missing by place,
    read from the stage logs (``before hop-0``: sent but not accepted by hop 0; ``hop-i``:
    accepted but not forwarded; ``hop-i->next``: forwarded but not accepted downstream; ``no
    report`` when nothing was published), ``lost`` their sum; ``exit_status``: the analyzer's
    (None: no report); ``other_exits``: every other component that exited non-zero without
    the bench killing it; ``message``: the first such component's last stderr line (the
    analyzer's first); ``notes``: what the scenario measured besides (RSS, attacks)."""

    scenario: str
    n: int
    sent: int
    counted: int
    duplicates: int
    lost_at: Mapping[str, int]
    exit_status: int | None
    other_exits: Mapping[str, int]
    wall_seconds: float
    verdict: str
    why: str
    message: str = ""
    notes: JsonObject = field(default_factory=dict)

    KEYS = (
        "scenario",
        "n",
        "sent",
        "counted",
        "duplicates",
        "lost",
        "lost_at",
        "exit_status",
        "other_exits",
        "wall_seconds",
        "verdict",
        "why",
        "message",
        "notes",
    )

    def __post_init__(self) -> None:
        require_str("scenario", self.scenario)
        require_int("n", self.n, 1)
        require_int("sent", self.sent, 0)
        require_int("counted", self.counted, 0)
        require_int("duplicates", self.duplicates, 0)
        for place, count in self.lost_at.items():
            require_str("lost_at key", place)
            require_int(f"lost_at[{place!r}]", count, -(2**63))  # < 0: counted twice there
        if self.exit_status is not None:
            require_int("exit_status", self.exit_status, -(2**31))
        for name, code in self.other_exits.items():
            require_str("other_exits key", name)
            require_int(f"other_exits[{name!r}]", code, -(2**31))
        require_number("wall_seconds", self.wall_seconds, low=0.0)
        if self.verdict not in VERDICTS:
            raise InvalidParameterError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")
        require_str("why", self.why)
        require_str("message", self.message, empty=True)
        object.__setattr__(self, "lost_at", dict(self.lost_at))
        object.__setattr__(self, "other_exits", dict(self.other_exits))
        object.__setattr__(self, "notes", require_json_object("notes", self.notes))

    @property
    def lost(self) -> int:
        """Reports missing, summed over the places of ``lost_at``."""
        return sum(self.lost_at.values())

    def to_json(self) -> dict[str, Any]:
        out = {key: getattr(self, key) for key in self.KEYS}
        out["lost_at"] = dict(self.lost_at)
        out["other_exits"] = dict(self.other_exits)
        return out

    @classmethod
    def from_json(cls, data: object) -> FaultRow:
        d = require_keys("fault row", json_input("fault row", data), cls.KEYS)
        lost_at = {
            require_str("lost_at key", k): require_integer(f"lost_at[{k!r}]", v, None)
            for k, v in require_json_object("lost_at", d["lost_at"]).items()
        }
        row = cls(
            scenario=require_str("scenario", d["scenario"]),
            n=require_integer("n", d["n"], 1),
            sent=require_integer("sent", d["sent"]),
            counted=require_integer("counted", d["counted"]),
            duplicates=require_integer("duplicates", d["duplicates"]),
            lost_at=lost_at,
            exit_status=optional(require_integer, "exit_status", d["exit_status"], low=None),
            other_exits={
                require_str("other_exits key", k): require_integer(f"other_exits[{k!r}]", v, None)
                for k, v in require_json_object("other_exits", d["other_exits"]).items()
            },
            wall_seconds=require_number("wall_seconds", d["wall_seconds"], low=0.0),
            verdict=require_str("verdict", d["verdict"]),
            why=require_str("why", d["why"]),
            message=require_str("message", d["message"], empty=True),
            notes=require_json_object("notes", d["notes"]),
        )
        if require_integer("lost", d["lost"], None) != row.lost:
            raise InvalidParameterError(
                f"lost must be the sum of lost_at = {row.lost}, got {d['lost']}"
            )
        return row
