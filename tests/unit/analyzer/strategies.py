"""Hypothesis strategies for the report records (analyzer/records.py): every record they draw is
valid, and together they reach every optional key and both privacy modes and outcomes."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from shuffledp.analyzer.records import (
    MODE_AT_EPS,
    MODE_AT_TARGET,
    AnalyzerTimings,
    Baseline,
    Estimate,
    PrivacyBlock,
    PublishedReport,
    Report,
    TVDistance,
    Utility,
)
from shuffledp.validation import JsonObject

names = st.text(min_size=1, max_size=12)
unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False, allow_infinity=False)
positive = st.floats(min_value=1e-300, max_value=1e6, allow_nan=False, allow_infinity=False)
non_negative = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | non_negative | names,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def privacy_blocks(draw: st.DrawFn, n: int | None = None) -> PrivacyBlock:
    n = draw(st.integers(0, 10**7)) if n is None else n
    mode = draw(st.sampled_from([MODE_AT_TARGET, MODE_AT_EPS]))
    target = mode == MODE_AT_TARGET
    common: dict[str, Any] = {
        "mode": mode,
        "n": n,
        "target_delta": draw(unit) if target else None,
        "eps_lower": draw(st.none() | non_negative) if target else None,
    }
    if n >= 2 and draw(st.booleans()):
        low, high = sorted(draw(st.tuples(unit, unit)))
        return PrivacyBlock(
            **common,
            eps=draw(non_negative),
            delta=high,
            delta_lower=low,
            bound=draw(names),
            guarantee=draw(names),
        )
    return PrivacyBlock(
        **common,
        eps=draw(st.none() | non_negative),
        delta=None,
        delta_lower=None,
        bound=None,
        error=draw(names),
    )


def floats_of(k: int) -> st.SearchStrategy[tuple[float, ...]]:
    return st.tuples(*([non_negative] * k))


@st.composite
def utilities(draw: st.DrawFn, k: int, received: bool) -> Utility:
    truth = draw(st.lists(st.integers(0, 1000), min_size=k, max_size=k).filter(any))
    ibu = draw(floats_of(k)) if received else None
    baseline = (
        Baseline(eps=draw(non_negative), delta=draw(unit), sigma=draw(non_negative))
        if draw(st.booleans())
        else Baseline(note=draw(names))
    )
    optional_tv = st.none() | unit
    return Utility(
        true_histogram=tuple(truth),
        tv_distance=TVDistance(
            shuffle=draw(optional_tv),
            shuffle_inv=draw(optional_tv),
            ibu=draw(optional_tv),
            gaussian=draw(optional_tv),
        ),
        ibu_method=draw(names) if received else None,
        ibu_distribution=ibu,
        baseline=baseline,
    )


@st.composite
def reports(draw: st.DrawFn, with_truth: bool | None = None) -> Report:
    k = draw(st.integers(2, 6))
    histogram = draw(st.lists(st.integers(0, 10**6), min_size=k, max_size=k))
    n = sum(histogram)
    estimate = (
        Estimate(distribution=None, counts=None, note=draw(names))
        if n == 0
        else Estimate(distribution=draw(floats_of(k)), counts=draw(floats_of(k)))
    )
    truth = draw(st.booleans()) if with_truth is None else with_truth
    return Report(
        round=draw(st.integers(0, 2**32)),
        n_expected=draw(st.integers(0, 10**7)),
        n_received=n,
        rejected=draw(st.dictionaries(names, st.integers(0, 10**6), max_size=4)),
        k=k,
        eps0=draw(positive),
        histogram=tuple(histogram),
        estimate=estimate,
        estimator=draw(names),
        privacy=draw(privacy_blocks(n)),
        randomness=draw(names),
        utility=draw(utilities(k, n > 0)) if truth else None,
    )


stage_logs = st.dictionaries(
    names,
    st.dictionaries(names.filter(lambda key: key != "rejected"), json_values, max_size=4).map(
        lambda log: dict[str, Any](log)
    ),
    max_size=3,
)


def as_stages(value: dict[str, Any]) -> dict[str, JsonObject]:
    return value


@st.composite
def published_reports(draw: st.DrawFn) -> PublishedReport:
    outcome = draw(st.sampled_from(["ok", "error", "warning"]))
    return PublishedReport(
        report=draw(reports()),
        stages=as_stages(draw(stage_logs)),
        timings=AnalyzerTimings(analyzer_collect_seconds=draw(non_negative)),
        error=draw(names) if outcome == "error" else None,
        warning=draw(names) if outcome == "warning" else None,
    )
