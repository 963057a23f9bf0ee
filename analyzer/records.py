"""The analyzer's report as typed records, with exact JSON round trips (docs/report-schema.md).

* :class:`PrivacyBlock`: the guarantee of one round (``privacy`` in the JSON).
* :class:`Estimate`, :class:`TVDistance`, :class:`Baseline`, :class:`Utility`: the estimate and,
  in simulations, its utility against the truth.
* :class:`Report`: what :func:`~shuffledp.analyzer.report.build_report` returns.
* :class:`PublishedReport`: the document the analyzer publishes on the report topic (the report,
  every stage's round log, timings, and an error or a warning); it carries
  ``"schema": "shuffledp/report/1"``.

Every record is frozen and validated when it is built: a rule broken raises
InvalidParameterError naming the JSON key and the value. ``to_json()`` gives plain JSON values
(dicts, lists, str, int, float, bool, None) in the key order the analyzer has always written;
``from_json`` takes such a dict (or its text) and refuses missing and unknown keys, so
``Record.from_json(r.to_json()) == r`` for every record r. Keys that only exist in one mode
(``privacy.target_delta``, ``error``, ...) are absent from the JSON, not null, when they do not
apply: the JSON is byte-for-byte what the analyzer wrote before these records existed, plus
``schema``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from shuffledp.errors import InvalidParameterError
from shuffledp.validation import (
    JsonObject,
    json_input,
    optional,
    require_counter,
    require_counts,
    require_int,
    require_integer,
    require_json_object,
    require_keys,
    require_number,
    require_numbers,
    require_str,
)

__all__ = [
    "MODE_AT_EPS",
    "MODE_AT_TARGET",
    "REPORT_SCHEMA",
    "AnalyzerTimings",
    "Baseline",
    "Delivery",
    "DeliveryLeg",
    "Estimate",
    "PrivacyBlock",
    "PublishedReport",
    "Report",
    "TVDistance",
    "Utility",
]

#: ``schema`` of the published report (bumped when a key changes meaning or disappears).
REPORT_SCHEMA = "shuffledp/report/1"
#: ``privacy.mode`` without a given eps: eps is found for ``target_delta``.
MODE_AT_TARGET = "eps at target delta"
#: ``privacy.mode`` with a given eps: the delta bracket at that eps.
MODE_AT_EPS = "delta at given eps"
#: ``baseline.mechanism``: the central Gaussian every estimate is compared with.
GAUSSIAN_MECHANISM = "analytic Gaussian (central, replace-one, L2 sensitivity sqrt 2)"


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    """Set ``key`` unless ``value`` is None (the keys that only exist in one mode)."""
    if value is not None:
        out[key] = value


def _floats(values: tuple[float, ...] | None) -> list[float] | None:
    return None if values is None else list(values)


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivacyBlock:
    """The guarantee of one round (``privacy``), from the ``tight`` accountant for n received.

    Either ``guarantee`` (with eps, delta, delta_lower and bound) or ``error`` (why there is no
    guarantee; delta, delta_lower and bound are then None). ``target_delta`` and ``eps_lower``
    exist exactly in mode :data:`MODE_AT_TARGET` (``eps_lower`` may be None there).
    """

    accountant: str = "tight"
    mode: str
    eps: float | None
    delta: float | None
    delta_lower: float | None
    bound: str | None
    n: int
    target_delta: float | None = None
    eps_lower: float | None = None
    guarantee: str | None = None
    error: str | None = None
    colluders: int = 0
    """C of the round manifest: counted reports assumed known to the adversary."""
    n_counted: int | None = None
    """The reports counted; ``n`` = n_counted - colluders (None: a report of before)."""

    def __post_init__(self) -> None:
        require_str("privacy.accountant", self.accountant)
        require_int("privacy.colluders", self.colluders, 0)
        if self.n_counted is not None:
            require_int("privacy.n_counted", self.n_counted, 0)
            if self.n != max(self.n_counted - self.colluders, 0):
                raise InvalidParameterError(
                    f"privacy.n must be n_counted - colluders = {self.n_counted} - "
                    f"{self.colluders}, got {self.n}"
                )
        if self.mode not in (MODE_AT_TARGET, MODE_AT_EPS):
            raise InvalidParameterError(
                f"privacy.mode must be {MODE_AT_TARGET!r} or {MODE_AT_EPS!r}, got {self.mode!r}"
            )
        require_int("privacy.n", self.n, 0)
        optional(require_number, "privacy.eps", self.eps, low=0.0)
        optional(require_number, "privacy.eps_lower", self.eps_lower, low=0.0)
        optional(require_number, "privacy.delta", self.delta, low=0.0, high=1.0)
        optional(require_number, "privacy.delta_lower", self.delta_lower, low=0.0, high=1.0)
        optional(require_str, "privacy.bound", self.bound)
        at_target = self.mode == MODE_AT_TARGET
        if at_target != (self.target_delta is not None):
            raise InvalidParameterError(
                f"privacy.target_delta must be given exactly in mode {MODE_AT_TARGET!r}, got "
                f"{self.target_delta!r} in mode {self.mode!r}"
            )
        if self.target_delta is not None:
            require_number("privacy.target_delta", self.target_delta, low=0.0, high=1.0)
        if not at_target and self.eps_lower is not None:
            raise InvalidParameterError(
                f"privacy.eps_lower exists only in mode {MODE_AT_TARGET!r}, got {self.eps_lower}"
            )
        self._check_outcome()

    def _check_outcome(self) -> None:
        if (self.guarantee is None) == (self.error is None):
            raise InvalidParameterError(
                "privacy must hold exactly one of guarantee and error, got "
                f"guarantee={self.guarantee!r}, error={self.error!r}"
            )
        needed = {
            "eps": self.eps,
            "delta": self.delta,
            "delta_lower": self.delta_lower,
            "bound": self.bound,
        }
        if self.guarantee is not None:
            require_str("privacy.guarantee", self.guarantee)
            missing = [key for key, value in needed.items() if value is None]
            if missing:
                raise InvalidParameterError(f"privacy with a guarantee needs {missing}, got None")
            if self.n < 2:
                raise InvalidParameterError(f"privacy.n must be >= 2 for a guarantee, got {self.n}")
            if self.delta_lower > self.delta:  # type: ignore[operator]
                raise InvalidParameterError(
                    f"privacy.delta_lower must be <= privacy.delta, got {self.delta_lower} > "
                    f"{self.delta}"
                )
        else:
            require_str("privacy.error", self.error)
            given = [key for key in ("delta", "delta_lower", "bound") if needed[key] is not None]
            if given:
                raise InvalidParameterError(f"privacy with an error must not give {given}")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "accountant": self.accountant,
            "mode": self.mode,
            "eps": self.eps,
            "delta": self.delta,
            "delta_lower": self.delta_lower,
            "bound": self.bound,
            "n": self.n,
            "colluders": self.colluders,
        }
        _put(out, "n_counted", self.n_counted)
        if self.mode == MODE_AT_TARGET:
            out["target_delta"] = self.target_delta
            out["eps_lower"] = self.eps_lower
        _put(out, "error", self.error)
        _put(out, "guarantee", self.guarantee)
        return out

    @classmethod
    def from_json(cls, data: object) -> PrivacyBlock:
        obj = json_input("privacy", data)
        base = ["accountant", "mode", "eps", "delta", "delta_lower", "bound", "n"]
        mode = obj.get("mode") if isinstance(obj, Mapping) else None
        extra = ["target_delta", "eps_lower"] if mode == MODE_AT_TARGET else []
        d = require_keys(
            "privacy", obj, base + extra, ["error", "guarantee", "colluders", "n_counted"]
        )
        return cls(
            accountant=require_str("privacy.accountant", d["accountant"]),
            mode=require_str("privacy.mode", d["mode"]),
            eps=optional(require_number, "privacy.eps", d["eps"]),
            delta=optional(require_number, "privacy.delta", d["delta"]),
            delta_lower=optional(require_number, "privacy.delta_lower", d["delta_lower"]),
            bound=optional(require_str, "privacy.bound", d["bound"]),
            n=require_integer("privacy.n", d["n"]),
            target_delta=optional(require_number, "privacy.target_delta", d.get("target_delta")),
            eps_lower=optional(require_number, "privacy.eps_lower", d.get("eps_lower")),
            guarantee=optional(require_str, "privacy.guarantee", d.get("guarantee")),
            error=optional(require_str, "privacy.error", d.get("error")),
            colluders=require_integer("privacy.colluders", d.get("colluders", 0)),
            n_counted=optional(require_integer, "privacy.n_counted", d.get("n_counted")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    """The headline estimate (``estimate``): ``distribution`` on the simplex and ``counts`` =
    distribution * n_received, both None (with a ``note``) when no report was received."""

    distribution: tuple[float, ...] | None
    counts: tuple[float, ...] | None
    note: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "distribution", _tuple(self.distribution))
        object.__setattr__(self, "counts", _tuple(self.counts))
        optional(require_numbers, "estimate.distribution", self.distribution)
        optional(require_numbers, "estimate.counts", self.counts)
        if (self.distribution is None) != (self.counts is None):
            raise InvalidParameterError(
                "estimate.distribution and estimate.counts must both be given or both be null"
            )
        if (self.distribution is None) != (self.note is not None):
            raise InvalidParameterError(
                f"estimate.note must be given exactly when there is no estimate, got {self.note!r}"
            )
        if (
            self.distribution is not None
            and self.counts is not None
            and len(self.distribution) != len(self.counts)
        ):
            raise InvalidParameterError(
                f"estimate.counts must have the distribution's {len(self.distribution)} "
                f"bins, got {len(self.counts)}"
            )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "distribution": _floats(self.distribution),
            "counts": _floats(self.counts),
        }
        _put(out, "note", self.note)
        return out

    @classmethod
    def from_json(cls, data: object) -> Estimate:
        d = require_keys(
            "estimate", json_input("estimate", data), ["distribution", "counts"], ["note"]
        )
        return cls(
            distribution=optional(require_numbers, "estimate.distribution", d["distribution"]),
            counts=optional(require_numbers, "estimate.counts", d["counts"]),
            note=optional(require_str, "estimate.note", d.get("note")),
        )


def _tuple(values: Any) -> Any:
    """Lists become tuples (records are immutable); anything else is left to the checks."""
    return tuple(values) if isinstance(values, list) else values


@dataclass(frozen=True, slots=True, kw_only=True)
class TVDistance:
    """Total variation distance from the truth to each estimate (``tv_distance``); None where it
    could not be computed. JSON keys: ``shuffle``, ``shuffle+INV``, ``IBU``, ``gaussian``."""

    shuffle: float | None
    shuffle_inv: float | None
    ibu: float | None
    gaussian: float | None

    KEYS = ("shuffle", "shuffle+INV", "IBU", "gaussian")

    def __post_init__(self) -> None:
        for key, value in zip(self.KEYS, self._values(), strict=True):
            optional(require_number, f"tv_distance[{key!r}]", value, low=0.0, high=1.0 + 1e-12)

    def _values(self) -> tuple[float | None, ...]:
        return (self.shuffle, self.shuffle_inv, self.ibu, self.gaussian)

    def to_json(self) -> dict[str, Any]:
        return dict(zip(self.KEYS, self._values(), strict=True))

    @classmethod
    def from_json(cls, data: object) -> TVDistance:
        d = require_keys("tv_distance", json_input("tv_distance", data), cls.KEYS)
        values = [optional(require_number, f"tv_distance[{k!r}]", d[k]) for k in cls.KEYS]
        return cls(shuffle=values[0], shuffle_inv=values[1], ibu=values[2], gaussian=values[3])


@dataclass(frozen=True, slots=True, kw_only=True)
class Baseline:
    """The central analytic Gaussian on the true histogram at the shuffle's (eps, delta)
    (``baseline``): eps, delta and sigma, or a ``note`` saying why it was not computed."""

    mechanism: str = GAUSSIAN_MECHANISM
    eps: float | None = None
    delta: float | None = None
    sigma: float | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        require_str("baseline.mechanism", self.mechanism)
        numbers = (self.eps, self.delta, self.sigma)
        if self.note is None:
            if any(value is None for value in numbers):
                raise InvalidParameterError(
                    f"baseline needs eps, delta and sigma or a note, got {numbers}"
                )
            require_number("baseline.eps", self.eps, low=0.0)
            require_number("baseline.delta", self.delta, low=0.0, high=1.0)
            require_number("baseline.sigma", self.sigma, low=0.0)
        else:
            require_str("baseline.note", self.note)
            if any(value is not None for value in numbers):
                raise InvalidParameterError(
                    f"baseline with a note must not give eps, delta or sigma, got {numbers}"
                )

    def to_json(self) -> dict[str, Any]:
        if self.note is not None:
            return {"mechanism": self.mechanism, "note": self.note}
        return {
            "mechanism": self.mechanism,
            "eps": self.eps,
            "delta": self.delta,
            "sigma": self.sigma,
        }

    @classmethod
    def from_json(cls, data: object) -> Baseline:
        obj = json_input("baseline", data)
        noted = isinstance(obj, Mapping) and "note" in obj
        keys = ["mechanism", "note"] if noted else ["mechanism", "eps", "delta", "sigma"]
        d = require_keys("baseline", obj, keys)
        return cls(
            mechanism=require_str("baseline.mechanism", d["mechanism"]),
            eps=None if noted else require_number("baseline.eps", d["eps"]),
            delta=None if noted else require_number("baseline.delta", d["delta"]),
            sigma=None if noted else require_number("baseline.sigma", d["sigma"]),
            note=require_str("baseline.note", d["note"]) if noted else None,
        )


#: The utility keys, in the order the report writes them.
UTILITY_KEYS = ("true_histogram", "tv_distance", "IBU_method", "IBU_distribution", "baseline")


@dataclass(frozen=True, slots=True, kw_only=True)
class Utility:
    """What only a simulation knows (the truth) and the estimates' distance to it. In the JSON
    these keys sit at the top of the report: ``true_histogram``, ``tv_distance``,
    ``IBU_method`` and ``IBU_distribution`` (both None/absent when nothing was received),
    ``baseline``."""

    true_histogram: tuple[int, ...]
    tv_distance: TVDistance
    ibu_method: str | None
    ibu_distribution: tuple[float, ...] | None
    baseline: Baseline

    def __post_init__(self) -> None:
        object.__setattr__(self, "true_histogram", _tuple(self.true_histogram))
        object.__setattr__(self, "ibu_distribution", _tuple(self.ibu_distribution))
        truth = require_counts("true_histogram", self.true_histogram)
        if sum(truth) < 1:
            raise InvalidParameterError("true_histogram must sum to at least 1, got 0")
        optional(require_str, "IBU_method", self.ibu_method)
        optional(require_numbers, "IBU_distribution", self.ibu_distribution)
        if (self.ibu_method is None) != (self.ibu_distribution is None):
            raise InvalidParameterError(
                "IBU_method and IBU_distribution must both be given or both be absent/null, got "
                f"IBU_method={self.ibu_method!r}"
            )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "true_histogram": list(self.true_histogram),
            "tv_distance": self.tv_distance.to_json(),
            "IBU_method": self.ibu_method,
        }
        _put(out, "IBU_distribution", _floats(self.ibu_distribution))
        out["baseline"] = self.baseline.to_json()
        return out

    @classmethod
    def from_json(cls, data: object) -> Utility:
        d = require_keys(
            "utility",
            json_input("utility", data),
            [k for k in UTILITY_KEYS if k != "IBU_distribution"],
            ["IBU_distribution"],
        )
        return cls(
            true_histogram=require_counts("true_histogram", d["true_histogram"]),
            tv_distance=TVDistance.from_json(d["tv_distance"]),
            ibu_method=optional(require_str, "IBU_method", d["IBU_method"]),
            ibu_distribution=optional(
                require_numbers, "IBU_distribution", d.get("IBU_distribution")
            ),
            baseline=Baseline.from_json(d["baseline"]),
        )


#: The report's own keys, in the order it writes them (the utility keys follow).
REPORT_KEYS = (
    "round",
    "n_expected",
    "n_received",
    "rejected",
    "k",
    "eps0",
    "histogram",
    "estimate",
    "estimator",
    "privacy",
    "randomness",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """The report of one round (:func:`~shuffledp.analyzer.report.build_report`): counts,
    estimate, privacy, and with the truth (simulations) the utility.

    Invariants: ``histogram`` has k counts summing to ``n_received``; the estimate has k bins
    (or none when n_received = 0); ``privacy.n`` = n_received; the truth has k bins.
    """

    round: int
    n_expected: int
    n_received: int
    rejected: Mapping[str, int]
    k: int
    eps0: float
    histogram: tuple[int, ...]
    estimate: Estimate
    estimator: str
    privacy: PrivacyBlock
    randomness: str
    utility: Utility | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "histogram", _tuple(self.histogram))
        object.__setattr__(self, "rejected", require_counter("rejected", self.rejected))
        require_int("round", self.round, 0)
        require_int("n_expected", self.n_expected, 0)
        require_int("k", self.k, 2)
        require_number("eps0", self.eps0, low=0.0)
        if self.eps0 <= 0:
            raise InvalidParameterError(f"eps0 must be > 0, got {self.eps0}")
        counts = require_counts("histogram", self.histogram, length=self.k)
        require_int("n_received", self.n_received, 0)
        if sum(counts) != self.n_received:
            raise InvalidParameterError(
                f"n_received must be the histogram's sum {sum(counts)}, got {self.n_received}"
            )
        counted = self.privacy.n if self.privacy.n_counted is None else self.privacy.n_counted
        if counted != self.n_received:
            raise InvalidParameterError(
                f"privacy.n_counted must be n_received = {self.n_received}, got {counted}"
            )
        require_str("estimator", self.estimator)
        require_str("randomness", self.randomness)
        self._check_bins()

    def _check_bins(self) -> None:
        bins = {"estimate.distribution": self.estimate.distribution}
        if self.utility is not None:
            bins["true_histogram"] = self.utility.true_histogram
            bins["IBU_distribution"] = self.utility.ibu_distribution
        for name, values in bins.items():
            if values is not None and len(values) != self.k:
                raise InvalidParameterError(
                    f"{name} must have k = {self.k} bins, got {len(values)}"
                )
        if (self.estimate.distribution is None) != (self.n_received == 0):
            raise InvalidParameterError(
                "estimate must be null exactly when no report was received (n_received = "
                f"{self.n_received})"
            )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "round": self.round,
            "n_expected": self.n_expected,
            "n_received": self.n_received,
            "rejected": dict(self.rejected),
            "k": self.k,
            "eps0": self.eps0,
            "histogram": list(self.histogram),
            "estimate": self.estimate.to_json(),
            "estimator": self.estimator,
            "privacy": self.privacy.to_json(),
            "randomness": self.randomness,
        }
        if self.utility is not None:
            out.update(self.utility.to_json())
        return out

    @classmethod
    def from_json(cls, data: object) -> Report:
        d = require_keys("report", json_input("report", data), REPORT_KEYS, UTILITY_KEYS)
        return cls.from_fields(d)

    @classmethod
    def from_fields(cls, d: Mapping[str, Any]) -> Report:
        """The report from the report keys of ``d`` (other keys are the caller's to check)."""
        with_truth = any(key in d for key in UTILITY_KEYS)
        utility = (
            Utility.from_json({key: d[key] for key in UTILITY_KEYS if key in d})
            if with_truth
            else None
        )
        return cls(
            round=require_integer("round", d["round"]),
            n_expected=require_integer("n_expected", d["n_expected"]),
            n_received=require_integer("n_received", d["n_received"]),
            rejected=require_counter("rejected", d["rejected"]),
            k=require_integer("k", d["k"], 2),
            eps0=require_number("eps0", d["eps0"]),
            histogram=require_counts("histogram", d["histogram"]),
            estimate=Estimate.from_json(d["estimate"]),
            estimator=require_str("estimator", d["estimator"]),
            privacy=PrivacyBlock.from_json(d["privacy"]),
            randomness=require_str("randomness", d["randomness"]),
            utility=utility,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalyzerTimings:
    """``timings`` of the published report: seconds the analyzer spent collecting."""

    analyzer_collect_seconds: float

    def __post_init__(self) -> None:
        require_number("timings.analyzer_collect_seconds", self.analyzer_collect_seconds, low=0.0)

    def to_json(self) -> dict[str, Any]:
        return {"analyzer_collect_seconds": self.analyzer_collect_seconds}

    @classmethod
    def from_json(cls, data: object) -> AnalyzerTimings:
        d = require_keys("timings", json_input("timings", data), ["analyzer_collect_seconds"])
        return cls(
            analyzer_collect_seconds=require_number(
                "timings.analyzer_collect_seconds", d["analyzer_collect_seconds"]
            )
        )


def require_stages(name: str, stages: object) -> Mapping[str, JsonObject]:
    """``stages``: each stage's own round log (written by the stage: shuffler/service.py,
    analyzer/service.py), a JSON object per stage name, read-only. A ``rejected`` entry, where a
    stage gives one, is a counter by reason."""
    if not isinstance(stages, Mapping):
        raise InvalidParameterError(f"{name} must be a JSON object, got {stages!r}")
    out: dict[str, JsonObject] = {}
    for stage, log in stages.items():
        require_str(f"{name} key", stage)
        checked = require_json_object(f"{name}[{stage!r}]", log)
        if "rejected" in checked:
            require_counter(f"{name}[{stage!r}].rejected", checked["rejected"])
        out[stage] = checked
    return MappingProxyType(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryLeg:
    """One leg of the round's delivery: ``source`` ("clients", "hop-0", ...) handed ``sent``
    messages to ``sink`` ("hop-0", ..., "analyzer"), which counted (accepted) ``counted`` of
    them and screened out ``rejected`` (counted in the report's ``rejected``: a message a
    stage screened out is accounted for, not lost). On the first leg ``sent`` is the round's
    expected reports and ``rejected`` 0: what hop 0 rejects is not a genuine report; on a later
    leg ``wrong-length``, ``duplicate``, ``batch-full`` and ``decryption-failed`` are not in
    ``rejected``: the messages came in the upstream's signed frames, so they are lost
    (protocol/delivery.py)."""

    source: str
    sink: str
    sent: int
    counted: int
    rejected: int = 0

    def __post_init__(self) -> None:
        require_str("delivery.legs[].source", self.source)
        require_str("delivery.legs[].sink", self.sink)
        require_int("delivery.legs[].sent", self.sent, 0)
        require_int("delivery.legs[].counted", self.counted, 0)
        require_int("delivery.legs[].rejected", self.rejected, 0)

    @property
    def lost(self) -> int:
        """Messages sent on this leg that its end neither counted nor rejected."""
        return max(0, self.sent - self.counted - self.rejected)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "sink": self.sink,
            "sent": self.sent,
            "counted": self.counted,
            "rejected": self.rejected,
        }

    @classmethod
    def from_json(cls, data: object) -> DeliveryLeg:
        keys = ("source", "sink", "sent", "counted", "rejected")
        d = require_keys("delivery.legs[]", data, keys)
        return cls(
            source=require_str("delivery.legs[].source", d["source"]),
            sink=require_str("delivery.legs[].sink", d["sink"]),
            sent=require_integer("delivery.legs[].sent", d["sent"]),
            counted=require_integer("delivery.legs[].counted", d["counted"]),
            rejected=require_integer("delivery.legs[].rejected", d["rejected"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """The round's accounting (``delivery``): ``expected`` reports (every enrolled client),
    ``legs`` from the clients to the last stage that ran, ``counted`` at the end of the last
    leg, ``lost`` = the legs' losses summed, ``clients_sent`` (what the client processes said
    they sent, when hop 0 heard their claims), ``loss_accepted`` (published anyway with
    ``--accept-loss``: only with a loss) and ``message`` (the loss's one line, exactly when
    ``lost`` > 0)."""

    expected: int
    counted: int
    lost: int
    legs: tuple[DeliveryLeg, ...]
    clients_sent: int | None = None
    loss_accepted: bool = False
    message: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "legs", tuple(self.legs))
        require_int("delivery.expected", self.expected, 0)
        require_int("delivery.counted", self.counted, 0)
        optional(require_int, "delivery.clients_sent", self.clients_sent, low=0)
        total = sum(leg.lost for leg in self.legs)
        if self.lost != total:
            raise InvalidParameterError(
                f"delivery.lost must be the legs' losses summed, {total}, got {self.lost!r}"
            )
        if (self.message is not None) != (self.lost > 0):
            raise InvalidParameterError(
                f"delivery.message must be given exactly when reports were lost (lost = "
                f"{self.lost}), got {self.message!r}"
            )
        optional(require_str, "delivery.message", self.message)
        if not isinstance(self.loss_accepted, bool) or (self.loss_accepted and not self.lost):
            raise InvalidParameterError(
                f"delivery.loss_accepted must be a bool, true only with a loss (lost = "
                f"{self.lost}), got {self.loss_accepted!r}"
            )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "expected": self.expected,
            "counted": self.counted,
            "lost": self.lost,
            "legs": [leg.to_json() for leg in self.legs],
        }
        _put(out, "clients_sent", self.clients_sent)
        out["loss_accepted"] = self.loss_accepted
        _put(out, "message", self.message)
        return out

    @classmethod
    def from_json(cls, data: object) -> Delivery:
        d = require_keys(
            "delivery",
            json_input("delivery", data),
            ("expected", "counted", "lost", "legs", "loss_accepted"),
            ("clients_sent", "message"),
        )
        legs = d["legs"]
        if not isinstance(legs, list):
            raise InvalidParameterError(f"delivery.legs must be a list, got {legs!r}")
        accepted = d["loss_accepted"]
        if not isinstance(accepted, bool):
            raise InvalidParameterError(f"delivery.loss_accepted must be a bool, got {accepted!r}")
        return cls(
            expected=require_integer("delivery.expected", d["expected"]),
            counted=require_integer("delivery.counted", d["counted"]),
            lost=require_integer("delivery.lost", d["lost"]),
            legs=tuple(DeliveryLeg.from_json(leg) for leg in legs),
            clients_sent=optional(require_integer, "delivery.clients_sent", d.get("clients_sent")),
            loss_accepted=accepted,
            message=optional(require_str, "delivery.message", d.get("message")),
        )


#: Keys the published report adds to the report's.
PUBLISHED_KEYS = ("schema", "stages", "timings")


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedReport:
    """What the analyzer publishes on the report topic (``"schema": "shuffledp/report/1"``):
    the :class:`Report`, every stage's round log (``stages``), ``timings``, the round's
    accounting (``delivery``: absent in reports written before it existed), and at most one
    of ``error`` (a stage refused the round, a loss without ``--accept-loss`` among the
    reasons: the histogram is empty) and ``warning`` (the deadline passed, or a loss was
    accepted; the report covers what was counted)."""

    report: Report
    stages: Mapping[str, JsonObject]
    timings: AnalyzerTimings
    error: str | None = None
    warning: str | None = None
    delivery: Delivery | None = None
    manifest: str | None = None
    """The hex SHA-256 digest of the round manifest the analyzer ran from (its k, eps0,
    colluders: docs/round-manifest.md); absent in reports written before manifests."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", require_stages("stages", self.stages))
        if self.manifest is not None and not _is_hex_digest(self.manifest):
            raise InvalidParameterError(
                f"manifest must be 64 lowercase hex characters, got {self.manifest!r}"
            )
        if self.delivery is not None and not isinstance(self.delivery, Delivery):
            raise InvalidParameterError(f"delivery must be a Delivery, got {self.delivery!r}")
        optional(require_str, "error", self.error)
        optional(require_str, "warning", self.warning)
        if self.error is not None and self.warning is not None:
            raise InvalidParameterError(
                f"a report holds at most one of error and warning, got error={self.error!r}, "
                f"warning={self.warning!r}"
            )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": REPORT_SCHEMA}
        _put(out, "manifest", self.manifest)
        out.update(self.report.to_json())
        out["stages"] = {stage: dict(log) for stage, log in self.stages.items()}
        _put(out, "error", self.error)
        _put(out, "warning", self.warning)
        if self.delivery is not None:
            out["delivery"] = self.delivery.to_json()
        out["timings"] = self.timings.to_json()
        return out

    @classmethod
    def from_json(cls, data: object) -> PublishedReport:
        d = require_keys(
            "report",
            json_input("report", data),
            (*PUBLISHED_KEYS, *REPORT_KEYS),
            (*UTILITY_KEYS, "error", "warning", "delivery", "manifest"),
        )
        require_schema("report", d["schema"], REPORT_SCHEMA)
        return cls(
            report=Report.from_fields(d),
            stages=require_stages("stages", d["stages"]),
            timings=AnalyzerTimings.from_json(d["timings"]),
            error=optional(require_str, "error", d.get("error")),
            warning=optional(require_str, "warning", d.get("warning")),
            delivery=None if "delivery" not in d else Delivery.from_json(d["delivery"]),
            manifest=optional(require_str, "manifest", d.get("manifest")),
        )


def _is_hex_digest(value: object) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def require_schema(name: str, value: object, expected: str) -> None:
    """InvalidParameterError unless ``value`` is the schema ``expected``."""
    if value != expected:
        raise InvalidParameterError(f"{name}.schema must be {expected!r}, got {value!r}")
