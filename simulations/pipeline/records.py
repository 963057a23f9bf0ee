"""The round log of a simulation (what `shuffledp simulate --json` prints) as typed records.

:class:`RoundLog` is the analyzer's report rebuilt with the truth (a
:class:`~shuffledp.analyzer.records.Report` with its utility), every stage's round log, the
timings, what the simulation ran (:class:`SimulationInfo`) and, with ``--chaos``, what was
injected and killed (:class:`ChaosSummary`). Its JSON carries ``"schema":
"shuffledp/round-log/1"`` and is otherwise the report's keys followed by ``stages``,
``warning`` (if any), ``delivery`` (the round's accounting), ``chaos`` (with --chaos), ``timings``, ``simulation`` and, from the Python
API, ``randomness_source``: every key is in
docs/report-schema.md. Records are frozen, validated when built (rule and value named), and
``from_json(r.to_json()) == r``; unknown and missing keys are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shuffledp.analyzer.records import (
    REPORT_KEYS,
    UTILITY_KEYS,
    Delivery,
    Report,
    require_schema,
    require_stages,
)
from shuffledp.errors import InvalidParameterError
from shuffledp.validation import (
    JsonObject,
    json_input,
    optional,
    require_bool,
    require_counter,
    require_int,
    require_integer,
    require_json_object,
    require_keys,
    require_number,
    require_str,
)

__all__ = [
    "ROUND_LOG_SCHEMA",
    "ChaosSummary",
    "HopKill",
    "InProcessRound",
    "RoundLog",
    "RoundTimings",
    "SimulationInfo",
]

#: The utility keys a round log always has (IBU_distribution is absent when nothing arrived).
REQUIRED_UTILITY_KEYS = tuple(key for key in UTILITY_KEYS if key != "IBU_distribution")
#: ``randomness_source`` values (the Python API's): the OS CSPRNG, a seed, a numpy Generator.
RANDOMNESS_SOURCES = ("os", "seeded", "generator")
#: ``schema`` of the round log (bumped when a key changes meaning or disappears).
ROUND_LOG_SCHEMA = "shuffledp/round-log/1"


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundTimings:
    """``timings`` of a round, in seconds: the whole run, its setup (keys, broker, launch), the
    round (launch to report), the slowest client process's sending, the analyzer's collection."""

    total_seconds: float
    setup_seconds: float
    round_seconds: float
    clients_send_seconds: float
    analyzer_collect_seconds: float

    KEYS = (
        "total_seconds",
        "setup_seconds",
        "round_seconds",
        "clients_send_seconds",
        "analyzer_collect_seconds",
    )

    def __post_init__(self) -> None:
        for key in self.KEYS:
            require_number(f"timings.{key}", getattr(self, key), low=0.0)

    def to_json(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.KEYS}

    @classmethod
    def from_json(cls, data: object) -> RoundTimings:
        d = require_keys("timings", json_input("timings", data), cls.KEYS)
        return cls(**{key: require_number(f"timings.{key}", d[key]) for key in cls.KEYS})


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationInfo:
    """``simulation``: what ran. ``dataset_details`` (facts about the data, e.g. a check-in
    file's region and rows read) is added by ``run_simulation`` and absent from a bare
    ``run_round``."""

    broker: str
    n_hops: int
    client_processes: int
    dataset: str
    seed: int | None
    topic_prefix: str
    keys: str
    authentication: str
    deadline_seconds: float
    min_batch: int
    dataset_details: JsonObject | None = None
    browser: JsonObject | None = None
    """``--browser-clients``: the clients that ran in headless Chromium, what they sent and hop
    0 confirmed, the browser and versions, its peak memory (simulations/pipeline/browser.py)."""

    KEYS = (
        "broker",
        "n_hops",
        "client_processes",
        "dataset",
        "seed",
        "topic_prefix",
        "keys",
        "authentication",
        "deadline_seconds",
        "min_batch",
    )

    def __post_init__(self) -> None:
        for key in ("broker", "dataset", "topic_prefix", "keys", "authentication"):
            require_str(f"simulation.{key}", getattr(self, key))
        require_int("simulation.n_hops", self.n_hops, 1)
        require_int("simulation.client_processes", self.client_processes, 1)
        if self.seed is not None:
            require_int("simulation.seed", self.seed, 0)
        require_number("simulation.deadline_seconds", self.deadline_seconds, low=0.0)
        require_int("simulation.min_batch", self.min_batch, 1)
        for key in ("dataset_details", "browser"):
            if getattr(self, key) is not None:
                value = require_json_object(f"simulation.{key}", getattr(self, key))
                object.__setattr__(self, key, value)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {key: getattr(self, key) for key in self.KEYS}
        if self.dataset_details is not None:
            out["dataset_details"] = self.dataset_details
        if self.browser is not None:
            out["browser"] = self.browser
        return out

    @classmethod
    def from_json(cls, data: object) -> SimulationInfo:
        d = require_keys(
            "simulation", json_input("simulation", data), cls.KEYS, ["dataset_details", "browser"]
        )
        return cls(
            broker=require_str("simulation.broker", d["broker"]),
            n_hops=require_integer("simulation.n_hops", d["n_hops"], 1),
            client_processes=require_integer(
                "simulation.client_processes", d["client_processes"], 1
            ),
            dataset=require_str("simulation.dataset", d["dataset"]),
            seed=optional(require_integer, "simulation.seed", d["seed"]),
            topic_prefix=require_str("simulation.topic_prefix", d["topic_prefix"]),
            keys=require_str("simulation.keys", d["keys"]),
            authentication=require_str("simulation.authentication", d["authentication"]),
            deadline_seconds=require_number("simulation.deadline_seconds", d["deadline_seconds"]),
            min_batch=require_integer("simulation.min_batch", d["min_batch"], 1),
            dataset_details=optional(
                require_json_object, "simulation.dataset_details", d.get("dataset_details")
            ),
            browser=optional(require_json_object, "simulation.browser", d.get("browser")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class HopKill:
    """``chaos.hop_killed``: the hop `simulate --chaos` killed with SIGKILL and restarted."""

    stage: str
    signal: str
    when: str
    last_progress_accepted: int | None
    process_was: str
    restarted: bool
    restart_seconds: float | None

    KEYS = (
        "stage",
        "signal",
        "when",
        "last_progress_accepted",
        "process_was",
        "restarted",
        "restart_seconds",
    )

    def __post_init__(self) -> None:
        for key in ("stage", "signal", "when", "process_was"):
            require_str(f"chaos.hop_killed.{key}", getattr(self, key))
        optional(
            require_integer,
            "chaos.hop_killed.last_progress_accepted",
            self.last_progress_accepted,
            low=0,
        )
        require_bool("chaos.hop_killed.restarted", self.restarted)
        optional(require_number, "chaos.hop_killed.restart_seconds", self.restart_seconds, low=0.0)

    def to_json(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.KEYS}

    @classmethod
    def from_json(cls, data: object) -> HopKill:
        d = require_keys("chaos.hop_killed", json_input("chaos.hop_killed", data), cls.KEYS)
        name = "chaos.hop_killed"
        return cls(
            stage=require_str(f"{name}.stage", d["stage"]),
            signal=require_str(f"{name}.signal", d["signal"]),
            when=require_str(f"{name}.when", d["when"]),
            last_progress_accepted=optional(
                require_integer, f"{name}.last_progress_accepted", d["last_progress_accepted"]
            ),
            process_was=require_str(f"{name}.process_was", d["process_was"]),
            restarted=require_bool(f"{name}.restarted", d["restarted"]),
            restart_seconds=optional(
                require_number, f"{name}.restart_seconds", d["restart_seconds"]
            ),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ChaosSummary:
    """``chaos`` (`simulate --chaos`): what the chaos clients injected (by kind), the
    rejections that must follow at hop 0 (by reason), what hop 0 rejected, the duplicates the
    broker redelivered to the restarted hop (observed - expected duplicates; negative when
    fewer were seen than injected), whether every other reason matched exactly, and whether
    every genuine report was counted once (``n_received == n``)."""

    injected: Mapping[str, int]
    injected_total: int
    expected_rejections: Mapping[str, int]
    hop0_rejections: Mapping[str, int]
    redelivered_duplicates: int
    rejections_as_expected: bool
    all_reports_counted_once: bool
    hop_killed: HopKill

    def __post_init__(self) -> None:
        for key in ("injected", "expected_rejections", "hop0_rejections"):
            object.__setattr__(self, key, require_counter(f"chaos.{key}", getattr(self, key)))
        require_int("chaos.injected_total", self.injected_total, 0)
        if self.injected_total != sum(self.injected.values()):
            raise InvalidParameterError(
                f"chaos.injected_total must be the sum of chaos.injected "
                f"{sum(self.injected.values())}, got {self.injected_total}"
            )
        require_integer("chaos.redelivered_duplicates", self.redelivered_duplicates, None)
        require_bool("chaos.rejections_as_expected", self.rejections_as_expected)
        require_bool("chaos.all_reports_counted_once", self.all_reports_counted_once)

    def to_json(self) -> dict[str, Any]:
        return {
            "injected": dict(self.injected),
            "injected_total": self.injected_total,
            "expected_rejections": dict(self.expected_rejections),
            "hop0_rejections": dict(self.hop0_rejections),
            "redelivered_duplicates": self.redelivered_duplicates,
            "rejections_as_expected": self.rejections_as_expected,
            "all_reports_counted_once": self.all_reports_counted_once,
            "hop_killed": self.hop_killed.to_json(),
        }

    @classmethod
    def from_json(cls, data: object) -> ChaosSummary:
        keys = (
            "injected",
            "injected_total",
            "expected_rejections",
            "hop0_rejections",
            "redelivered_duplicates",
            "rejections_as_expected",
            "all_reports_counted_once",
            "hop_killed",
        )
        d = require_keys("chaos", json_input("chaos", data), keys)
        return cls(
            injected=require_counter("chaos.injected", d["injected"]),
            injected_total=require_integer("chaos.injected_total", d["injected_total"]),
            expected_rejections=require_counter(
                "chaos.expected_rejections", d["expected_rejections"]
            ),
            hop0_rejections=require_counter("chaos.hop0_rejections", d["hop0_rejections"]),
            redelivered_duplicates=require_integer(
                "chaos.redelivered_duplicates", d["redelivered_duplicates"], None
            ),
            rejections_as_expected=require_bool(
                "chaos.rejections_as_expected", d["rejections_as_expected"]
            ),
            all_reports_counted_once=require_bool(
                "chaos.all_reports_counted_once", d["all_reports_counted_once"]
            ),
            hop_killed=HopKill.from_json(d["hop_killed"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundLog:
    """One simulated round (``"schema": "shuffledp/round-log/1"``): the report with the truth,
    every stage's round log, at most a ``warning``, ``chaos`` with --chaos, timings, and what
    ran. Invariant: the report has its utility (a simulation knows the truth)."""

    report: Report
    stages: Mapping[str, JsonObject]
    timings: RoundTimings
    simulation: SimulationInfo
    warning: str | None = None
    chaos: ChaosSummary | None = None
    #: The round's accounting (the analyzer's ``delivery``), when the analyzer gave it.
    delivery: Delivery | None = None
    #: Set by the Python API (``shuffledp.simulate``): which kind of randomness drove the run.
    randomness_source: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", require_stages("stages", self.stages))
        if self.randomness_source not in (None, *RANDOMNESS_SOURCES):
            raise InvalidParameterError(
                f"randomness_source must be one of {RANDOMNESS_SOURCES}, got "
                f"{self.randomness_source!r}"
            )
        if self.report.utility is None:
            raise InvalidParameterError(
                "a round log's report must hold the truth (true_histogram, tv_distance, ...)"
            )
        optional(require_str, "warning", self.warning)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": ROUND_LOG_SCHEMA, **self.report.to_json()}
        out["stages"] = {stage: dict(log) for stage, log in self.stages.items()}
        if self.warning is not None:
            out["warning"] = self.warning
        if self.delivery is not None:
            out["delivery"] = self.delivery.to_json()
        if self.chaos is not None:
            out["chaos"] = self.chaos.to_json()
        out["timings"] = self.timings.to_json()
        out["simulation"] = self.simulation.to_json()
        if self.randomness_source is not None:
            out["randomness_source"] = self.randomness_source
        return out

    @classmethod
    def from_json(cls, data: object) -> RoundLog:
        d = require_keys(
            "round log",
            json_input("round log", data),
            ("schema", *REPORT_KEYS, *REQUIRED_UTILITY_KEYS, "stages", "timings", "simulation"),
            ("IBU_distribution", "warning", "delivery", "chaos", "randomness_source"),
        )
        require_schema("round log", d["schema"], ROUND_LOG_SCHEMA)
        return cls(
            report=Report.from_fields(d),
            stages=require_stages("stages", d["stages"]),
            timings=RoundTimings.from_json(d["timings"]),
            simulation=SimulationInfo.from_json(d["simulation"]),
            warning=optional(require_str, "warning", d.get("warning")),
            delivery=Delivery.from_json(d["delivery"]) if "delivery" in d else None,
            chaos=ChaosSummary.from_json(d["chaos"]) if "chaos" in d else None,
            randomness_source=optional(
                require_str, "randomness_source", d.get("randomness_source")
            ),
        )


#: ``path`` of a round: the multi-process pipeline or the fast in-process round.
ROUND_PATHS = ("pipeline", "fast")


@dataclass(frozen=True, slots=True, kw_only=True)
class InProcessRound:
    """What ``shuffledp.run_round_in_process`` returns: the analyzer's report with the truth,
    the dataset's label, the path ("fast") and which kind of randomness drove it. JSON: the
    report's keys with ``dataset``, ``path`` and ``randomness_source`` beside them (one flat
    object, as docs/python-api.md shows). Invariant: the report has its utility."""

    report: Report
    dataset: str
    path: str
    randomness_source: str

    KEYS = ("dataset", "path", "randomness_source")

    def __post_init__(self) -> None:
        require_str("dataset", self.dataset)
        if self.path not in ROUND_PATHS:
            raise InvalidParameterError(f"path must be one of {ROUND_PATHS}, got {self.path!r}")
        if self.randomness_source not in RANDOMNESS_SOURCES:
            raise InvalidParameterError(
                f"randomness_source must be one of {RANDOMNESS_SOURCES}, got "
                f"{self.randomness_source!r}"
            )
        if self.report.utility is None:
            raise InvalidParameterError(
                "an in-process round's report must hold the truth (true_histogram, ...)"
            )

    def to_json(self) -> dict[str, Any]:
        return {**self.report.to_json(), **{key: getattr(self, key) for key in self.KEYS}}

    @classmethod
    def from_json(cls, data: object) -> InProcessRound:
        d = require_keys(
            "in-process round",
            json_input("in-process round", data),
            (*REPORT_KEYS, *REQUIRED_UTILITY_KEYS, *cls.KEYS),
            ("IBU_distribution",),
        )
        return cls(
            report=Report.from_fields(d),
            dataset=require_str("dataset", d["dataset"]),
            path=require_str("path", d["path"]),
            randomness_source=require_str("randomness_source", d["randomness_source"]),
        )
