"""What `shuffledp stream` emits, as typed records with exact JSON round trips.

`shuffledp stream --json` prints one JSON object per line, every one with ``"schema":
"shuffledp/stream/1"`` first and ``type`` second:

* :class:`EpochRecord` (``"type": "epoch"``): one epoch with check-ins: ``run`` (its round's
  round log, flattened in, without the round log's own ``schema``), ``skipped`` (a ``reason``)
  or ``failed`` (an ``error``; its reports are charged as lone k-RR reports);
* :class:`EmptyEpochsRecord` (``"type": "empty"``): a run of epochs without any check-in;
* :class:`StreamSummary` (``"type": "summary"``), last: the counts, the input, the budget, the
  worst per-user composed guarantee (:class:`WorstUser`) and the accounting's cost
  (:class:`CompositionInfo`).

:func:`read_stream_record` reads any line back into its record. Every record is frozen and
validated when built: a broken rule raises InvalidParameterError naming the JSON key and the
value; ``from_json`` refuses missing and unknown keys and a wrong ``schema``, and
``Record.from_json(r.to_json()) == r``. docs/report-schema.md describes every key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from shuffledp.analyzer.records import require_schema
from shuffledp.errors import InvalidParameterError
from shuffledp.simulations.pipeline.records import ROUND_LOG_SCHEMA, RoundLog
from shuffledp.simulations.pipeline.stream.budget import Budget
from shuffledp.validation import (
    json_input,
    optional,
    require_bool,
    require_counter,
    require_int,
    require_integer,
    require_keys,
    require_number,
    require_str,
)

if TYPE_CHECKING:
    from shuffledp.simulations.data.checkins import LoadStats

__all__ = [
    "EPOCH_STATUSES",
    "STREAM_SCHEMA",
    "CompositionInfo",
    "EmptyEpochsRecord",
    "EpochRecord",
    "StreamInput",
    "StreamRecord",
    "StreamSummary",
    "TopCells",
    "WorstUser",
    "read_stream_record",
]

#: ``schema`` of every line `shuffledp stream --json` prints (bumped when a key changes meaning
#: or disappears).
STREAM_SCHEMA = "shuffledp/stream/1"
#: ``status`` of an epoch record.
EPOCH_STATUSES = ("run", "skipped", "failed")
#: ``reason`` of every empty record.
NO_CHECKIN = "no check-in in the region"
#: How many cells ``top_cells`` lists.
TOP_CELLS = 3
_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def _require_iso(name: str, value: object) -> str:
    text = require_str(name, value)
    if not _ISO.fullmatch(text):
        raise InvalidParameterError(f"{name} must be a UTC time YYYY-MM-DDTHH:MM:SSZ, got {text!r}")
    return text


def _require_span(name: str, start: object, end: object) -> None:
    """``start`` and ``end`` are UTC times and start < end (the ISO form sorts as time does)."""
    if _require_iso(f"{name}.start", start) >= _require_iso(f"{name}.end", end):
        raise InvalidParameterError(f"{name}.start must be before its end, got {start} >= {end}")


def _require_type(name: str, data: Mapping[str, Any], expected: str) -> None:
    """The ``schema`` and ``type`` every stream line begins with."""
    require_schema(name, data.get("schema"), STREAM_SCHEMA)
    if data.get("type") != expected:
        raise InvalidParameterError(f"{name}.type must be {expected!r}, got {data.get('type')!r}")


def _mapping(name: str, data: object) -> Mapping[str, Any]:
    obj = json_input(name, data)
    if not isinstance(obj, Mapping):
        raise InvalidParameterError(f"{name} must be a JSON object, got {type(obj).__name__}")
    return obj


def _ints(name: str, values: object, low: int = 0) -> tuple[int, ...]:
    if not isinstance(values, list | tuple):
        raise InvalidParameterError(f"{name} must be a list of integers, got {values!r}")
    return tuple(require_integer(f"{name}[{i}]", v, low) for i, v in enumerate(values))


def _strs(name: str, values: object) -> tuple[str, ...]:
    if not isinstance(values, list | tuple):
        raise InvalidParameterError(f"{name} must be a list of strings, got {values!r}")
    return tuple(require_str(f"{name}[{i}]", v) for i, v in enumerate(values))


# ----------------------------------------------------------------------------------------------
# Epoch records


@dataclass(frozen=True, slots=True, kw_only=True)
class TopCells:
    """``top_cells`` of a run epoch: the :data:`TOP_CELLS` largest cells (largest first; ties:
    the lower cell) of the estimate (absent when nothing was received) and of the truth."""

    estimate: tuple[int, ...] | None
    true: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.estimate is not None:
            object.__setattr__(self, "estimate", _ints("top_cells.estimate", self.estimate))
        object.__setattr__(self, "true", _ints("top_cells.true", self.true))

    @classmethod
    def of(cls, log: RoundLog) -> TopCells:
        """The top cells of a round log: of its estimate's counts and of its true histogram."""
        counts = log.report.estimate.counts
        assert log.report.utility is not None  # a round log holds the truth
        return cls(
            estimate=None if counts is None else _largest(counts),
            true=_largest(log.report.utility.true_histogram),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {} if self.estimate is None else {"estimate": list(self.estimate)}
        out["true"] = list(self.true)
        return out

    @classmethod
    def from_json(cls, data: object) -> TopCells:
        d = require_keys("top_cells", json_input("top_cells", data), ["true"], ["estimate"])
        estimate = d.get("estimate")
        return cls(
            estimate=None if estimate is None else _ints("top_cells.estimate", estimate),
            true=_ints("top_cells.true", d["true"]),
        )


def _largest(values: tuple[float, ...] | tuple[int, ...]) -> tuple[int, ...]:
    order = np.argsort(-np.asarray(values, dtype=float), kind="stable")[:TOP_CELLS]
    return tuple(int(i) for i in order)


#: The keys every epoch record begins with (after ``schema`` and ``type``), in order.
EPOCH_KEYS = (
    "epoch",
    "start",
    "end",
    "checkins",
    "users_active",
    "cut_off",
    "budget_exhausted",
    "users_reporting",
)
#: Each status's own keys, written after the round log's (run) or after EPOCH_KEYS.
STATUS_KEYS = {
    "run": ("status", "charged_n", "over_budget_after_round", "top_cells"),
    "skipped": ("status", "reason"),
    "failed": ("status", "error", "charged_n"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochRecord:
    """One epoch with check-ins (``"type": "epoch"``) and what became of its round.

    ``status`` ``run``: ``round_log`` is the round's log (its ``round`` = ``epoch``, its
    ``n_expected`` = ``users_reporting``), ``charged_n`` = min(n_received, users_reporting) is
    the n each reporter was charged, ``over_budget_after_round`` counts reporters over budget
    after lost reports. ``skipped``: a ``reason``, nobody charged. ``failed``: an ``error``,
    each reporter charged a lone k-RR report (``charged_n`` = 1).
    """

    epoch: int
    start: str
    end: str
    checkins: int
    users_active: int
    cut_off: int
    budget_exhausted: int
    users_reporting: int
    status: str
    reason: str | None = None
    error: str | None = None
    charged_n: int | None = None
    over_budget_after_round: int | None = None
    round_log: RoundLog | None = None

    def __post_init__(self) -> None:
        require_int("epoch", self.epoch, 0)
        _require_span("epoch", self.start, self.end)
        require_int("users_active", self.users_active, 1)
        require_int("checkins", self.checkins, self.users_active)
        require_int("budget_exhausted", self.budget_exhausted, 0, self.users_active)
        require_int("cut_off", self.cut_off, 0, self.budget_exhausted)
        require_int(
            "users_reporting",
            self.users_reporting,
            0,
            self.users_active - self.budget_exhausted,
            bound="users_active - budget_exhausted",
        )
        if self.status not in EPOCH_STATUSES:
            raise InvalidParameterError(
                f"status must be one of {EPOCH_STATUSES}, got {self.status!r}"
            )
        self._check_status_keys()
        if self.status == "run":
            self._check_run()
        elif self.status == "failed":
            require_int("users_reporting", self.users_reporting, 2)  # its reports were sent
            if self.charged_n != 1:
                raise InvalidParameterError(
                    f"charged_n of a failed epoch must be 1 (a lone k-RR report), got "
                    f"{self.charged_n}"
                )

    def _check_status_keys(self) -> None:
        """Each status has exactly its own keys (STATUS_KEYS): the others are None."""
        given = {
            "reason": self.reason,
            "error": self.error,
            "charged_n": self.charged_n,
            "over_budget_after_round": self.over_budget_after_round,
            "top_cells": self.round_log,
        }
        wanted = STATUS_KEYS[self.status]
        for key, value in given.items():
            if (key in wanted) != (value is not None):
                need = "needs" if key in wanted else "must not have"
                name = "a round log" if key == "top_cells" else key
                shown = "a round log" if isinstance(value, RoundLog) else repr(value)
                raise InvalidParameterError(
                    f"an epoch record with status {self.status!r} {need} {name}, got {shown}"
                )
        optional(require_str, "reason", self.reason)
        optional(require_str, "error", self.error)

    def _check_run(self) -> None:
        assert self.round_log is not None and self.charged_n is not None
        require_int("users_reporting", self.users_reporting, 2)  # a round has >= 2 reports
        report = self.round_log.report
        if report.round != self.epoch:
            raise InvalidParameterError(f"round must be epoch {self.epoch}, got {report.round}")
        if report.n_expected != self.users_reporting:
            raise InvalidParameterError(
                f"n_expected must be users_reporting = {self.users_reporting}, got "
                f"{report.n_expected}"
            )
        charged = min(report.n_received, self.users_reporting)
        if self.charged_n != charged:
            raise InvalidParameterError(
                f"charged_n must be min(n_received, users_reporting) = {charged}, got "
                f"{self.charged_n}"
            )
        over = self.over_budget_after_round
        assert over is not None
        require_int("over_budget_after_round", over, 0, self.users_reporting)
        if over and not 0 < charged < self.users_reporting:
            raise InvalidParameterError(
                "over_budget_after_round must be 0 unless reports were lost (0 < charged_n < "
                f"users_reporting), got {over} with charged_n = {charged}"
            )

    @property
    def top_cells(self) -> TopCells | None:
        """The round's top cells (run epochs), from its round log."""
        return None if self.round_log is None else TopCells.of(self.round_log)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": STREAM_SCHEMA, "type": "epoch"}
        out.update({key: getattr(self, key) for key in EPOCH_KEYS})
        if self.round_log is not None:
            log = self.round_log.to_json()
            del log["schema"]  # an epoch record is not a round log
            out.update(log)
        for key in STATUS_KEYS[self.status]:
            value = getattr(self, key)
            out[key] = value.to_json() if isinstance(value, TopCells) else value
        return out

    @classmethod
    def from_json(cls, data: object) -> EpochRecord:
        obj = _mapping("epoch record", data)
        _require_type("epoch record", obj, "epoch")
        status = obj.get("status")
        if status not in STATUS_KEYS:
            raise InvalidParameterError(
                f"epoch record.status must be one of {EPOCH_STATUSES}, got {status!r}"
            )
        own = ("schema", "type", *EPOCH_KEYS, *STATUS_KEYS[status])
        log = None
        if status == "run":
            rest = {key: value for key, value in obj.items() if key not in own}
            log = RoundLog.from_json({"schema": ROUND_LOG_SCHEMA, **rest})
            obj = {key: value for key, value in obj.items() if key in own}
        d = require_keys("epoch record", obj, own)
        record = cls(
            **{
                key: require_integer(key, d[key])
                for key in EPOCH_KEYS
                if key not in ("start", "end")
            },
            start=_require_iso("start", d["start"]),
            end=_require_iso("end", d["end"]),
            status=status,
            reason=optional(require_str, "reason", d.get("reason")),
            error=optional(require_str, "error", d.get("error")),
            charged_n=optional(require_integer, "charged_n", d.get("charged_n")),
            over_budget_after_round=optional(
                require_integer, "over_budget_after_round", d.get("over_budget_after_round")
            ),
            round_log=log,
        )
        record._check_top_cells(d.get("top_cells"))
        return record

    def _check_top_cells(self, data: object) -> None:
        """``top_cells`` as read must be the round log's (it is derived, not stored)."""
        if data is None:
            return
        read = TopCells.from_json(data)
        if read != self.top_cells:
            raise InvalidParameterError(
                f"top_cells must be the round log's largest cells {self.top_cells}, got {read}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class EmptyEpochsRecord:
    """A run of epochs ``first_epoch``..``last_epoch`` without any check-in in the region
    (``"type": "empty"``), from ``start`` to ``end``; always ``status`` ``skipped`` with the
    reason :data:`NO_CHECKIN`; ``epochs`` = last_epoch - first_epoch + 1."""

    first_epoch: int
    last_epoch: int
    start: str
    end: str

    KEYS = ("first_epoch", "last_epoch", "epochs", "start", "end", "status", "reason")

    def __post_init__(self) -> None:
        require_int("first_epoch", self.first_epoch, 1)  # epoch 0 holds the first check-in
        require_int("last_epoch", self.last_epoch, self.first_epoch)
        _require_span("empty", self.start, self.end)

    @property
    def epochs(self) -> int:
        return self.last_epoch - self.first_epoch + 1

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": STREAM_SCHEMA,
            "type": "empty",
            "first_epoch": self.first_epoch,
            "last_epoch": self.last_epoch,
            "epochs": self.epochs,
            "start": self.start,
            "end": self.end,
            "status": "skipped",
            "reason": NO_CHECKIN,
        }

    @classmethod
    def from_json(cls, data: object) -> EmptyEpochsRecord:
        obj = _mapping("empty record", data)
        _require_type("empty record", obj, "empty")
        d = require_keys("empty record", obj, ("schema", "type", *cls.KEYS))
        record = cls(
            first_epoch=require_integer("first_epoch", d["first_epoch"]),
            last_epoch=require_integer("last_epoch", d["last_epoch"]),
            start=_require_iso("start", d["start"]),
            end=_require_iso("end", d["end"]),
        )
        fixed = {"epochs": record.epochs, "status": "skipped", "reason": NO_CHECKIN}
        for key, value in fixed.items():
            if d[key] != value:
                raise InvalidParameterError(f"{key} must be {value!r}, got {d[key]!r}")
        return record


#: What ``on_record`` receives: one per epoch, or per run of empty epochs.
StreamRecord = EpochRecord | EmptyEpochsRecord


# ----------------------------------------------------------------------------------------------
# The summary


@dataclass(frozen=True, slots=True, kw_only=True)
class WorstUser:
    """``worst_user``: the weakest composed guarantee among users. ``eps`` at ``delta`` (null,
    with a ``note``, when no finite eps reaches it), ``delta_at_budget_eps`` (the delta at the
    budget's eps; null without a budget), the ``rounds`` of that history for one user holding
    it (``epochs`` increasing, ``round_sizes`` the n charged), how many users share it, and the
    bound family that gave eps (``bound``)."""

    eps: float | None
    delta: float
    delta_at_budget_eps: float | None
    rounds: int
    epochs: tuple[int, ...]
    round_sizes: tuple[int, ...]
    users_with_this_history: int
    bound: str
    note: str | None = None

    KEYS = (
        "eps",
        "delta",
        "delta_at_budget_eps",
        "rounds",
        "epochs",
        "round_sizes",
        "users_with_this_history",
        "bound",
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "epochs", _ints("worst_user.epochs", self.epochs))
        object.__setattr__(
            self, "round_sizes", _ints("worst_user.round_sizes", self.round_sizes, 1)
        )
        optional(require_number, "worst_user.eps", self.eps, low=0.0)
        require_number("worst_user.delta", self.delta, low=0.0, high=1.0)
        optional(
            require_number,
            "worst_user.delta_at_budget_eps",
            self.delta_at_budget_eps,
            low=0.0,
            high=1.0,
        )
        require_int("worst_user.rounds", self.rounds, 1)
        for key in ("epochs", "round_sizes"):
            if len(getattr(self, key)) != self.rounds:
                raise InvalidParameterError(
                    f"worst_user.{key} must hold worst_user.rounds = {self.rounds} values, got "
                    f"{len(getattr(self, key))}"
                )
        if any(a >= b for a, b in pairwise(self.epochs)):
            raise InvalidParameterError(f"worst_user.epochs must increase, got {self.epochs}")
        require_int("worst_user.users_with_this_history", self.users_with_this_history, 1)
        require_str("worst_user.bound", self.bound)
        if (self.eps is None) != (self.note is not None):
            raise InvalidParameterError(
                f"worst_user.note must be given exactly when eps is null, got {self.note!r}"
            )
        optional(require_str, "worst_user.note", self.note)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {key: getattr(self, key) for key in self.KEYS}
        out["epochs"], out["round_sizes"] = list(self.epochs), list(self.round_sizes)
        if self.note is not None:
            out["note"] = self.note
        return out

    @classmethod
    def from_json(cls, data: object) -> WorstUser:
        d = require_keys("worst_user", json_input("worst_user", data), cls.KEYS, ["note"])
        name = "worst_user"
        return cls(
            eps=optional(require_number, f"{name}.eps", d["eps"]),
            delta=require_number(f"{name}.delta", d["delta"]),
            delta_at_budget_eps=optional(
                require_number, f"{name}.delta_at_budget_eps", d["delta_at_budget_eps"]
            ),
            rounds=require_integer(f"{name}.rounds", d["rounds"]),
            epochs=_ints(f"{name}.epochs", d["epochs"]),
            round_sizes=_ints(f"{name}.round_sizes", d["round_sizes"], 1),
            users_with_this_history=require_integer(
                f"{name}.users_with_this_history", d["users_with_this_history"]
            ),
            bound=require_str(f"{name}.bound", d["bound"]),
            note=optional(require_str, f"{name}.note", d.get("note")),
        )


#: ``composition.method``: how each user's rounds are composed.
COMPOSITION_METHOD = (
    "dp-accounting PLDs of each bound family's dominating pair, one per round, composed; "
    "minimum over families (pessimistic rounding)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompositionInfo:
    """``composition``: how the per-user guarantees were composed and what it cost."""

    discretization: float
    families: tuple[str, ...]
    compositions: int
    stored_peak_mib: float
    evictions: int
    accountant_seconds: float
    method: str = COMPOSITION_METHOD
    #: One line per family that used a looser pair where its own was over its outcome cap
    #: (optimal-blanket: krr-clones' pair, up to about 3x looser); empty when none did.
    fallbacks: tuple[str, ...] = ()

    KEYS = (
        "method",
        "discretization",
        "families",
        "compositions",
        "stored_peak_mib",
        "evictions",
        "accountant_seconds",
    )
    OPTIONAL_KEYS = ("fallbacks",)

    def __post_init__(self) -> None:
        require_str("composition.method", self.method)
        object.__setattr__(self, "fallbacks", _strs("composition.fallbacks", self.fallbacks))
        if require_number("composition.discretization", self.discretization) <= 0:
            raise InvalidParameterError(
                f"composition.discretization must be > 0, got {self.discretization}"
            )
        object.__setattr__(self, "families", _strs("composition.families", self.families))
        if not self.families:
            raise InvalidParameterError("composition.families must name at least one family")
        require_int("composition.compositions", self.compositions, 0)
        require_number("composition.stored_peak_mib", self.stored_peak_mib, low=0.0)
        require_int("composition.evictions", self.evictions, 0)
        require_number("composition.accountant_seconds", self.accountant_seconds, low=0.0)

    def to_json(self) -> dict[str, Any]:
        out = {key: getattr(self, key) for key in self.KEYS}
        out["families"] = list(self.families)
        if self.fallbacks:
            out["fallbacks"] = list(self.fallbacks)
        return out

    @classmethod
    def from_json(cls, data: object) -> CompositionInfo:
        d = require_keys(
            "composition", json_input("composition", data), cls.KEYS, cls.OPTIONAL_KEYS
        )
        return cls(
            method=require_str("composition.method", d["method"]),
            discretization=require_number("composition.discretization", d["discretization"]),
            families=_strs("composition.families", d["families"]),
            compositions=require_integer("composition.compositions", d["compositions"]),
            stored_peak_mib=require_number("composition.stored_peak_mib", d["stored_peak_mib"]),
            evictions=require_integer("composition.evictions", d["evictions"]),
            accountant_seconds=require_number(
                "composition.accountant_seconds", d["accountant_seconds"]
            ),
            fallbacks=_strs("composition.fallbacks", d.get("fallbacks", [])),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamInput:
    """``input``: what was read (the reader's counts,
    :meth:`~shuffledp.simulations.data.checkins.LoadStats.as_dict`) and how many check-ins
    fell outside the region. ``format`` is null before the first row; ``rejected`` counts rows
    by reason, ``rejected_examples`` gives the first line numbers of each."""

    source: str
    format: str | None
    rows: int
    accepted: int
    rejected: Mapping[str, int]
    rejected_examples: Mapping[str, tuple[int, ...]]
    header: str | None
    truncated: str | None
    outside_region: int

    KEYS = (
        "source",
        "format",
        "rows",
        "accepted",
        "rejected",
        "rejected_examples",
        "header",
        "truncated",
        "outside_region",
    )

    def __post_init__(self) -> None:
        require_str("input.source", self.source)
        optional(require_str, "input.format", self.format)
        object.__setattr__(self, "rejected", require_counter("input.rejected", self.rejected))
        examples = _examples("input.rejected_examples", self.rejected_examples)
        object.__setattr__(self, "rejected_examples", examples)
        require_int("input.rows", self.rows, 0)
        rejected = sum(self.rejected.values())
        require_int(
            "input.accepted", self.accepted, 0, self.rows - rejected, bound="rows - rejected"
        )
        unknown = sorted(set(examples) - set(self.rejected))
        if unknown:
            raise InvalidParameterError(
                f"input.rejected_examples must only name reasons of input.rejected, got {unknown}"
            )
        optional(require_str, "input.header", self.header, empty=True)
        optional(require_str, "input.truncated", self.truncated)
        require_int("input.outside_region", self.outside_region, 0)

    @classmethod
    def from_load_stats(cls, stats: LoadStats, outside_region: int) -> StreamInput:
        """The input block from a reader's LoadStats (its ``as_dict()``) and the count outside."""
        return cls.from_json({**stats.as_dict(), "outside_region": outside_region})

    def to_json(self) -> dict[str, Any]:
        out = {key: getattr(self, key) for key in self.KEYS}
        out["rejected"] = dict(self.rejected)
        out["rejected_examples"] = {k: list(v) for k, v in self.rejected_examples.items()}
        return out

    @classmethod
    def from_json(cls, data: object) -> StreamInput:
        d = require_keys("input", json_input("input", data), cls.KEYS)
        return cls(
            source=require_str("input.source", d["source"]),
            format=optional(require_str, "input.format", d["format"]),
            rows=require_integer("input.rows", d["rows"]),
            accepted=require_integer("input.accepted", d["accepted"]),
            rejected=require_counter("input.rejected", d["rejected"]),
            rejected_examples=_examples("input.rejected_examples", d["rejected_examples"]),
            header=optional(require_str, "input.header", d["header"], empty=True),
            truncated=optional(require_str, "input.truncated", d["truncated"]),
            outside_region=require_integer("input.outside_region", d["outside_region"]),
        )


def _examples(name: str, value: object) -> Mapping[str, tuple[int, ...]]:
    if not isinstance(value, Mapping):
        raise InvalidParameterError(f"{name} must be a JSON object, got {value!r}")
    out = {require_str(f"{name} key", k): _ints(f"{name}[{k!r}]", v, 1) for k, v in value.items()}
    return MappingProxyType(out)


#: The summary's counts of epochs, in the order it writes them (after ``epochs``).
EPOCH_COUNTS = ("epochs_run", "epochs_skipped", "epochs_empty", "epochs_failed")
#: The summary's keys, in order (``input`` is last, and absent until the command adds it).
SUMMARY_KEYS = (
    "epochs",
    *EPOCH_COUNTS,
    "budget_cut_offs",
    "over_budget_after_round",
    "skipped_by_reason",
    "stopped_at_max_epochs",
    "checkins_in_epochs",
    "outside_region",
    "late",
    "late_examples",
    "users",
    "users_reported",
    "users_cut_off",
    "budget",
    "worst_user",
    "composition",
    "region",
    "epoch_seconds",
    "eps0",
    "k",
    "seconds",
)
#: The summary's keys that hold an integer >= 0.
SUMMARY_COUNTS = (
    "epochs",
    *EPOCH_COUNTS,
    "budget_cut_offs",
    "over_budget_after_round",
    "checkins_in_epochs",
    "outside_region",
    "late",
    "users",
    "users_reported",
    "users_cut_off",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamSummary:
    """The last line (``"type": "summary"``): what the stream did, over all epochs.

    Invariants: ``epochs`` = run + skipped + empty + failed; ``skipped_by_reason`` sums to
    ``epochs_skipped``; ``users_reported`` <= ``users``; ``users_cut_off`` = ``budget_cut_offs``
    + ``over_budget_after_round`` (a user is cut off once, before a round or after one);
    ``late_examples`` holds at most ``late`` entries; ``input`` is absent from the runner's
    summary and added by `shuffledp stream`.
    """

    epochs: int
    epochs_run: int
    epochs_skipped: int
    epochs_empty: int
    epochs_failed: int
    budget_cut_offs: int
    over_budget_after_round: int
    skipped_by_reason: Mapping[str, int]
    stopped_at_max_epochs: bool
    checkins_in_epochs: int
    outside_region: int
    late: int
    late_examples: tuple[str, ...]
    users: int
    users_reported: int
    users_cut_off: int
    budget: Budget | None
    worst_user: WorstUser | None
    composition: CompositionInfo
    region: str
    epoch_seconds: int
    eps0: float
    k: int
    seconds: float
    input: StreamInput | None = None

    def __post_init__(self) -> None:
        for key in SUMMARY_COUNTS:
            require_int(key, getattr(self, key), 0)
        counter = require_counter("skipped_by_reason", self.skipped_by_reason)
        object.__setattr__(self, "skipped_by_reason", counter)
        object.__setattr__(self, "late_examples", _strs("late_examples", self.late_examples))
        require_bool("stopped_at_max_epochs", self.stopped_at_max_epochs)
        require_str("region", self.region)
        require_int("epoch_seconds", self.epoch_seconds, 1)
        if require_number("eps0", self.eps0) <= 0:
            raise InvalidParameterError(f"eps0 must be > 0, got {self.eps0}")
        require_int("k", self.k, 2)
        require_number("seconds", self.seconds, low=0.0)
        self._check_sums()

    def _check_sums(self) -> None:
        rules = [
            ("epochs", sum(getattr(self, key) for key in EPOCH_COUNTS), "the sum of epochs_*"),
            ("epochs_skipped", sum(self.skipped_by_reason.values()), "skipped_by_reason's sum"),
            (
                "users_cut_off",
                self.budget_cut_offs + self.over_budget_after_round,
                "budget_cut_offs + over_budget_after_round",
            ),
        ]
        for key, want, what in rules:
            if getattr(self, key) != want:
                raise InvalidParameterError(
                    f"{key} must be {what} = {want}, got {getattr(self, key)}"
                )
        if self.users_reported > self.users:
            raise InvalidParameterError(
                f"users_reported must be <= users = {self.users}, got {self.users_reported}"
            )
        if len(self.late_examples) > self.late:
            raise InvalidParameterError(
                f"late_examples must hold at most late = {self.late} entries, got "
                f"{len(self.late_examples)}"
            )
        if self.budget is None and self.users_cut_off:
            raise InvalidParameterError(
                f"users_cut_off must be 0 without a budget, got {self.users_cut_off}"
            )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": STREAM_SCHEMA, "type": "summary"}
        out.update({key: getattr(self, key) for key in SUMMARY_KEYS})
        out["skipped_by_reason"] = dict(self.skipped_by_reason)
        out["late_examples"] = list(self.late_examples)
        for key in ("budget", "worst_user", "composition"):
            value = out[key]
            out[key] = None if value is None else value.to_json()
        if self.input is not None:
            out["input"] = self.input.to_json()
        return out

    @classmethod
    def from_json(cls, data: object) -> StreamSummary:
        obj = _mapping("summary", data)
        _require_type("summary", obj, "summary")
        d = require_keys("summary", obj, ("schema", "type", *SUMMARY_KEYS), ["input"])
        return cls(
            **{key: require_integer(key, d[key]) for key in SUMMARY_COUNTS},
            skipped_by_reason=require_counter("skipped_by_reason", d["skipped_by_reason"]),
            stopped_at_max_epochs=require_bool("stopped_at_max_epochs", d["stopped_at_max_epochs"]),
            late_examples=_strs("late_examples", d["late_examples"]),
            budget=None if d["budget"] is None else Budget.from_json(d["budget"]),
            worst_user=None if d["worst_user"] is None else WorstUser.from_json(d["worst_user"]),
            composition=CompositionInfo.from_json(d["composition"]),
            region=require_str("region", d["region"]),
            epoch_seconds=require_integer("epoch_seconds", d["epoch_seconds"], 1),
            eps0=require_number("eps0", d["eps0"]),
            k=require_integer("k", d["k"], 2),
            seconds=require_number("seconds", d["seconds"]),
            input=StreamInput.from_json(d["input"]) if "input" in d else None,
        )


#: Each ``type`` and its record.
_READERS: dict[str, Any] = {
    "epoch": EpochRecord.from_json,
    "empty": EmptyEpochsRecord.from_json,
    "summary": StreamSummary.from_json,
}


def read_stream_record(data: object) -> EpochRecord | EmptyEpochsRecord | StreamSummary:
    """Any line of `shuffledp stream --json` (a dict, or its text) as its record, by ``type``."""
    obj = _mapping("stream record", data)
    require_schema("stream record", obj.get("schema"), STREAM_SCHEMA)
    kind = obj.get("type")
    if kind not in _READERS:
        raise InvalidParameterError(
            f"stream record.type must be one of {tuple(_READERS)}, got {kind!r}"
        )
    record: EpochRecord | EmptyEpochsRecord | StreamSummary = _READERS[kind](obj)
    return record
