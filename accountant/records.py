"""The accountant's answers as typed records: what `shuffledp account --json` prints.

One JSON shape whatever is asked (``tight``, one bound, ``all``; one round or ``--rounds R``)::

    {"schema": "shuffledp/account/1",
     "mechanism": {"name": "shuffled k-RR", "n": ..., "k": ..., "eps0": ...},
     "query": {"eps": ... | null, "delta": ... | null, "bound": ..., "rounds": ..., "nx0": ...},
     "results": [ one BoundResult per bound, every one with the same keys ]}

A key that does not apply to a bound is null, never absent (docs/report-schema.md describes each
one). Numbers may be ``Infinity`` where a bound certifies no finite eps (Python's json writes and
reads that token; NaN never appears). Records are frozen and validated when built (rule and
value named); ``from_json`` refuses missing and unknown keys and ``from_json(r.to_json()) == r``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from shuffledp.accountant.bounds.base import BoundKind
from shuffledp.errors import InvalidParameterError
from shuffledp.validation import (
    json_input,
    optional,
    require_int,
    require_integer,
    require_keys,
    require_number,
    require_str,
)

__all__ = [
    "ACCOUNT_SCHEMA",
    "AccountAnswer",
    "BoundResult",
    "MechanismRecord",
    "Query",
    "WitnessDataset",
]

#: ``schema`` of `shuffledp account --json` (bumped when a key changes meaning or disappears).
ACCOUNT_SCHEMA = "shuffledp/account/1"
#: ``mechanism.name``.
SHUFFLED_KRR = "shuffled k-RR"
#: ``composition`` values: one round, privacy-loss distributions, Renyi DP.
COMPOSITIONS = ("none", "pld", "rdp")


@dataclass(frozen=True, slots=True, kw_only=True)
class MechanismRecord:
    """``mechanism``: n users applying k-RR with local epsilon eps0, then a shuffle."""

    name: str = SHUFFLED_KRR
    n: int
    k: int
    eps0: float

    def __post_init__(self) -> None:
        if self.name != SHUFFLED_KRR:
            raise InvalidParameterError(
                f"mechanism.name must be {SHUFFLED_KRR!r}, got {self.name!r}"
            )
        require_int("mechanism.n", self.n, 2)
        require_int("mechanism.k", self.k, 2)
        if require_number("mechanism.eps0", self.eps0) <= 0:
            raise InvalidParameterError(f"mechanism.eps0 must be > 0, got {self.eps0}")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "n": self.n, "k": self.k, "eps0": self.eps0}

    @classmethod
    def from_json(cls, data: object) -> MechanismRecord:
        d = require_keys("mechanism", json_input("mechanism", data), ["name", "n", "k", "eps0"])
        return cls(
            name=require_str("mechanism.name", d["name"]),
            n=require_integer("mechanism.n", d["n"], 2),
            k=require_integer("mechanism.k", d["k"], 2),
            eps0=require_number("mechanism.eps0", d["eps0"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Query:
    """``query``: exactly one of ``eps`` (report delta at it) and ``delta`` (report eps at it);
    ``bound`` as asked (a name or ``all``); ``rounds`` composed; ``nx0`` as given (or null)."""

    eps: float | None
    delta: float | None
    bound: str
    rounds: int = 1
    nx0: int | None = None

    def __post_init__(self) -> None:
        if (self.eps is None) == (self.delta is None):
            raise InvalidParameterError(
                f"query must give exactly one of eps and delta, got eps={self.eps}, "
                f"delta={self.delta}"
            )
        optional(require_number, "query.eps", self.eps, low=0.0)
        if self.delta is not None and not 0.0 < require_number("query.delta", self.delta) < 1.0:
            raise InvalidParameterError(f"query.delta must be in (0, 1), got {self.delta}")
        require_str("query.bound", self.bound)
        require_int("query.rounds", self.rounds, 1)
        if self.nx0 is not None:
            require_int("query.nx0", self.nx0, 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "eps": self.eps,
            "delta": self.delta,
            "bound": self.bound,
            "rounds": self.rounds,
            "nx0": self.nx0,
        }

    @classmethod
    def from_json(cls, data: object) -> Query:
        d = require_keys(
            "query", json_input("query", data), ["eps", "delta", "bound", "rounds", "nx0"]
        )
        return cls(
            eps=optional(require_number, "query.eps", d["eps"]),
            delta=optional(require_number, "query.delta", d["delta"]),
            bound=require_str("query.bound", d["bound"]),
            rounds=require_integer("query.rounds", d["rounds"], 1),
            nx0=optional(require_integer, "query.nx0", d["nx0"]),
        )


#: Each witness family and the key that sizes it ("counts": x0, with x1 and x2 beside it).
_WITNESS_KEY = {"F": "a", "single-bin": "nx0", "counts": "x0"}


@dataclass(frozen=True, slots=True, kw_only=True)
class WitnessDataset:
    """A concrete dataset whose exact delta is a lower bound: ``F(a)`` (a other users hold x0,
    the rest one third value), ``single-bin`` with nx0 others holding x0, or (k = 3) ``counts``:
    x0 = size others hold x0, x1 hold x1, x2 hold x2. JSON: ``{"family": "F", "a": 0}``,
    ``{"family": "single-bin", "nx0": 5}`` or ``{"family": "counts", "x0": 3, "x1": 0, "x2": 96}``."""

    family: str
    size: int
    x1: int | None = None
    x2: int | None = None

    def __post_init__(self) -> None:
        if self.family not in _WITNESS_KEY:
            raise InvalidParameterError(
                f"dataset.family must be one of {sorted(_WITNESS_KEY)}, got {self.family!r}"
            )
        require_int(f"dataset.{_WITNESS_KEY[self.family]}", self.size, 0)
        if (self.family == "counts") != (self.x1 is not None and self.x2 is not None):
            raise InvalidParameterError(
                f"dataset.x1 and dataset.x2 are given exactly for the family counts, "
                f"got family {self.family!r} with x1={self.x1!r}, x2={self.x2!r}"
            )
        for key in ("x1", "x2"):
            if getattr(self, key) is not None:
                require_int(f"dataset.{key}", getattr(self, key), 0)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"family": self.family, _WITNESS_KEY[self.family]: self.size}
        if self.family == "counts":
            out.update(x1=self.x1, x2=self.x2)
        return out

    @classmethod
    def from_json(cls, data: object) -> WitnessDataset:
        obj = json_input("dataset", data)
        family = obj.get("family") if isinstance(obj, Mapping) else None
        key = _WITNESS_KEY.get(family, "a") if isinstance(family, str) else "a"
        rest = ["x1", "x2"] if family == "counts" else []
        d = require_keys("dataset", obj, ["family", key, *rest])
        return cls(
            family=require_str("dataset.family", d["family"]),
            size=require_integer(f"dataset.{key}", d[key]),
            **{k: require_integer(f"dataset.{k}", d[k]) for k in rest},
        )


#: The numeric keys of a result, each finite or +Infinity, or null where it does not apply.
_NUMBERS = (
    "eps",
    "delta",
    "eps_lower",
    "eps_upper",
    "delta_lower",
    "delta_upper",
    "ratio",
    "delta_x0_over_x1",
    "delta_x1_over_x0",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundResult:
    """One bound's answer (an element of ``results``); every key is present in the JSON, null
    where it does not apply (docs/report-schema.md, "account")."""

    bound: str
    kind: str
    guarantee: str
    rounds: int = 1
    composition: str = "none"
    eps: float | None = None
    delta: float | None = None
    eps_lower: float | None = None
    eps_upper: float | None = None
    delta_lower: float | None = None
    delta_upper: float | None = None
    upper_from: str | None = None
    lower_from: str | None = None
    ratio: float | None = None
    upper_skipped: str | None = None
    dataset: WitnessDataset | None = None
    nx0: int | None = None
    delta_x0_over_x1: float | None = None
    delta_x1_over_x0: float | None = None
    pair: str | None = None
    order: int | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        require_str("results[].bound", self.bound)
        kinds = [str(kind) for kind in BoundKind]
        if self.kind not in kinds:
            raise InvalidParameterError(f"results[].kind must be one of {kinds}, got {self.kind!r}")
        require_str("results[].guarantee", self.guarantee)
        require_int("results[].rounds", self.rounds, 1)
        if self.composition not in COMPOSITIONS:
            raise InvalidParameterError(
                f"results[].composition must be one of {COMPOSITIONS}, got {self.composition!r}"
            )
        if (self.composition == "none") != (self.rounds == 1):
            raise InvalidParameterError(
                f"results[].composition must be 'none' exactly for one round, got "
                f"{self.composition!r} over {self.rounds} rounds"
            )
        for key in _NUMBERS:
            optional(require_number, f"results[].{key}", getattr(self, key), low=0.0, infinite=True)
        for key in ("upper_from", "lower_from", "upper_skipped", "pair", "error"):
            optional(require_str, f"results[].{key}", getattr(self, key))
        for key in ("nx0", "order"):
            optional(require_int, f"results[].{key}", getattr(self, key), low=0)
        self._check_outcome()

    def _check_outcome(self) -> None:
        numbers = {key: getattr(self, key) for key in _NUMBERS if getattr(self, key) is not None}
        if self.error is not None:
            if numbers:
                raise InvalidParameterError(
                    f"results[] with an error must not give numbers, got {sorted(numbers)}"
                )
            return
        if self.eps is None or self.delta is None:
            raise InvalidParameterError(
                f"results[] for {self.bound} needs eps and delta, got eps={self.eps}, "
                f"delta={self.delta}"
            )
        for low, high in (("eps_lower", "eps_upper"), ("delta_lower", "delta_upper")):
            lo, hi = getattr(self, low), getattr(self, high)
            if lo is not None and hi is not None and lo > hi:
                raise InvalidParameterError(
                    f"results[].{low} must be <= {high} for {self.bound}, got {lo} > {hi}"
                )
        if not math.isinf(self.delta) and self.delta > 1.0:
            raise InvalidParameterError(f"results[].delta must be <= 1, got {self.delta}")

    def to_json(self) -> dict[str, Any]:
        out = {field.name: getattr(self, field.name) for field in fields(self)}
        out["dataset"] = None if self.dataset is None else self.dataset.to_json()
        return out

    @classmethod
    def from_json(cls, data: object) -> BoundResult:
        names = [field.name for field in fields(cls)]
        d = require_keys("results[]", json_input("results[]", data), names)
        values: dict[str, Any] = {
            "bound": require_str("results[].bound", d["bound"]),
            "kind": require_str("results[].kind", d["kind"]),
            "guarantee": require_str("results[].guarantee", d["guarantee"]),
            "rounds": require_integer("results[].rounds", d["rounds"], 1),
            "composition": require_str("results[].composition", d["composition"]),
            "dataset": None if d["dataset"] is None else WitnessDataset.from_json(d["dataset"]),
        }
        for key in _NUMBERS:
            values[key] = optional(require_number, f"results[].{key}", d[key], infinite=True)
        for key in ("upper_from", "lower_from", "upper_skipped", "pair", "error"):
            values[key] = optional(require_str, f"results[].{key}", d[key])
        for key in ("nx0", "order"):
            values[key] = optional(require_integer, f"results[].{key}", d[key])
        return cls(**values)


@dataclass(frozen=True, slots=True, kw_only=True)
class AccountAnswer:
    """What `shuffledp account --json` prints: the mechanism, the query, one result per bound
    (in the order `--bound all` lists them)."""

    mechanism: MechanismRecord
    query: Query
    results: tuple[BoundResult, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "results", tuple(self.results))
        if not self.results:
            raise InvalidParameterError("results must hold at least one bound's answer, got []")
        for result in self.results:
            if result.rounds != self.query.rounds:
                raise InvalidParameterError(
                    f"results[].rounds must be query.rounds = {self.query.rounds}, got "
                    f"{result.rounds} ({result.bound})"
                )
            given, value = (
                ("eps", result.eps) if self.query.eps is not None else ("delta", result.delta)
            )
            asked = self.query.eps if self.query.eps is not None else self.query.delta
            if result.error is None and value != asked:
                raise InvalidParameterError(
                    f"results[].{given} must be the query's {asked}, got {value} ({result.bound})"
                )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": ACCOUNT_SCHEMA,
            "mechanism": self.mechanism.to_json(),
            "query": self.query.to_json(),
            "results": [result.to_json() for result in self.results],
        }

    @classmethod
    def from_json(cls, data: object) -> AccountAnswer:
        d = require_keys(
            "account", json_input("account", data), ["schema", "mechanism", "query", "results"]
        )
        if d["schema"] != ACCOUNT_SCHEMA:
            raise InvalidParameterError(
                f"account.schema must be {ACCOUNT_SCHEMA!r}, got {d['schema']!r}"
            )
        results = d["results"]
        if not isinstance(results, list):
            raise InvalidParameterError(f"results must be a list, got {results!r}")
        return cls(
            mechanism=MechanismRecord.from_json(d["mechanism"]),
            query=Query.from_json(d["query"]),
            results=tuple(BoundResult.from_json(item) for item in results),
        )
