"""The fast in-process path against the real pipeline (embedded broker, hops as processes): the
two-sample check of tests/unit/simulations/test_fastpath.py (Bernstein's inequality, false alarm
<= 1e-6), which also says how the check is built."""

from __future__ import annotations

import numpy as np
import pytest

from shuffledp.simulations.experiments.fastpath import (
    RoundSpec,
    run_spec,
    run_specs_through_pipeline,
)
from tests.unit.simulations.test_fastpath import (
    EPS0,
    REPORT_KEYS,
    K,
    N,
    _pooled_fast,
    _two_sample_rejects,
    _values,
)


@pytest.mark.integration
def test_fast_path_and_pipeline_give_the_same_histogram_distribution() -> None:
    """Two full pipeline rounds (``run_specs_through_pipeline``, what ``--pipeline`` uses: the
    embedded broker, 3 hops, onion encryption, separate processes) and 200 fast-path rounds
    over the same 2,000 fixed values: the pooled pipeline counts / 2 and the pooled fast counts
    / 200 pass the two-sample check (every bin and the weighted statistic; false alarm <= 1e-6
    if both follow the k-RR law, which the first test checks for the fast path). Every pipeline
    report counts all 2,000 reports, rejects none and has the fast path's keys."""
    values = _values()
    spec = RoundSpec(values=values, k=K, eps0=EPS0, eps=1.0, label="fixed synthetic values")
    pipeline_rounds = 2
    reports = run_specs_through_pipeline([spec] * pipeline_rounds, quiet=True)
    pooled = np.zeros(K, dtype=np.int64)
    for report in reports:
        assert report["path"] == "pipeline"
        assert report["n_received"] == N
        assert set(report["rejected"].values()) == {0}
        assert report["true_histogram"] == np.bincount(values, minlength=K).tolist()
        assert report["privacy"]["eps"] == 1.0
        assert report["randomness"] == "os-csprng"
        pooled += np.asarray(report["histogram"], dtype=np.int64)
    fast_rounds = 200
    fast = _pooled_fast(values, fast_rounds, EPS0)
    assert not _two_sample_rejects(values, pooled, pipeline_rounds, fast, fast_rounds), (
        pooled / pipeline_rounds,
        fast / fast_rounds,
    )
    fast_report = run_spec(spec)
    assert set(fast_report) >= REPORT_KEYS
    assert set(reports[0]) >= set(fast_report)
