"""The analyzer's round (shuffledp.analyzer.round.AnalyzerRound) and the report
(shuffledp.analyzer.report.build_report): each rejection reason from a crafted, correctly wrapped
message, exact counts, and the report's contract (docs/report-schema.md). No statistical test here."""

from __future__ import annotations

import json
import math
import os
import re
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.accountant import ShuffledKRR, Tight, eps_for_delta
from shuffledp.analyzer import krr_mle, shuffle_inv, tv_distance
from shuffledp.analyzer.records import Report
from shuffledp.analyzer.report import (
    IBU_METHOD_EM,
    IBU_METHOD_FALLBACK,
    build_report,
    merge_rejected,
)
from shuffledp.analyzer.round import AnalyzerRound
from shuffledp.clients.client import make_client_messages
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol import (
    RECORD_SIZE,
    REJECTION_REASONS,
    VERSION,
    encode_record,
    generate_keypair,
    message_length,
    wrap,
)
from shuffledp.shuffler.hop import HopRound
from tests.binding import MANIFEST_DIGEST, OTHER_DIGEST

H = 2
K = 6
ROUND = 1234
HOPS = [generate_keypair() for _ in range(H)]
ANALYZER = generate_keypair()
STRANGER = generate_keypair()
LENGTH = message_length(H, H)


def analyzer() -> AnalyzerRound:
    return AnalyzerRound(
        round_id=ROUND, k=K, n_hops=H, private_key=ANALYZER.private, manifest_digest=MANIFEST_DIGEST
    )


def sealed(record: bytes) -> bytes:
    """The analyzer-stage message of ``record``: what the last hop forwards."""
    return wrap(record, [], ANALYZER.public)


def raw_record(
    *,
    version: int = VERSION,
    round_id: int = ROUND,
    value: int = 0,
    digest: bytes = MANIFEST_DIGEST,
) -> bytes:
    """A record built byte by byte (the layout of protocol/record.py), bypassing the encoder's
    checks so that it can carry an out-of-range value, another version or manifest."""
    data = struct.pack(">BQI32s", version, round_id, value, digest)
    return data + os.urandom(RECORD_SIZE - len(data))


def through_hops(messages: list[bytes]) -> list[bytes]:
    """Run client messages through the H hops, as the analyzer receives them."""
    for index, kp in enumerate(HOPS):
        hop = HopRound(
            hop_index=index,
            n_hops=H,
            round_id=ROUND,
            private_key=kp.private,
            expected_size=len(messages),
            min_batch=1,
        )
        for message in messages:
            assert hop.offer(message) is None
        messages = hop.close().messages
    return messages


def test_valid_reports_are_counted() -> None:
    stage = analyzer()
    values = [0, 1, 1, 5, 5, 5]
    for value in values:
        assert (
            stage.offer(sealed(encode_record(ROUND, value, K, manifest_digest=MANIFEST_DIGEST)))
            is None
        )
    histogram = stage.histogram()
    assert histogram.dtype == np.int64 and histogram.shape == (K,)
    assert histogram.tolist() == [1, 2, 0, 0, 0, 3]
    assert stage.n_received == 6
    assert stage.rejected == dict.fromkeys(REJECTION_REASONS, 0)
    histogram[0] = 99  # a copy: the round's counts do not change
    assert stage.histogram()[0] == 1


def test_wrong_round_through_the_whole_onion() -> None:
    """A record of another round, wrapped for these hops and this analyzer: the hops cannot
    tell (they see no round id) and forward it; the analyzer rejects it as wrong-round."""
    keys = [kp.public for kp in HOPS]
    stale = make_client_messages(
        [2, 3],
        k=K,
        eps0=1.0,
        round_id=ROUND - 1,
        hop_public_keys=keys,
        analyzer_public_key=ANALYZER.public,
        manifest_digest=MANIFEST_DIGEST,
    )
    fresh = make_client_messages(
        [4],
        k=K,
        eps0=1.0,
        round_id=ROUND,
        hop_public_keys=keys,
        analyzer_public_key=ANALYZER.public,
        manifest_digest=MANIFEST_DIGEST,
    )
    arrived = through_hops(stale + fresh)
    stage = analyzer()
    results = sorted(str(stage.offer(m)) for m in arrived)
    assert results == ["None", "wrong-round", "wrong-round"]
    assert stage.n_received == 1 and stage.rejected["wrong-round"] == 2


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (raw_record(value=K), "value-out-of-range"),
        (raw_record(value=2**32 - 1), "value-out-of-range"),
        (raw_record(version=VERSION + 1), "bad-version"),
        (raw_record(version=0), "bad-version"),
        (raw_record(version=VERSION + 1, round_id=ROUND + 1, value=K), "bad-version"),  # first
        (raw_record(round_id=ROUND + 1, value=K), "wrong-round"),  # round before range
        (raw_record(digest=OTHER_DIGEST), "wrong-manifest"),
        (raw_record(digest=OTHER_DIGEST, round_id=ROUND + 1, value=K), "wrong-manifest"),  # first
        (raw_record(version=VERSION + 1, digest=OTHER_DIGEST), "bad-version"),
        (raw_record(round_id=2**64 - 1), "wrong-round"),
        (raw_record(value=K - 1), None),  # the largest valid value passes
        (b"\x00" * (RECORD_SIZE - 1), "wrong-length"),  # a short record inside a short layer
    ],
    # The records hold fresh random bytes: ids from them would differ between xdist workers.
    ids=[
        "value-k",
        "value-max",
        "version-next",
        "version-0",
        "version-before-round-and-value",
        "round-before-value",
        "digest",
        "digest-before-round-and-value",
        "version-before-digest",
        "round-max",
        "largest-valid-value",
        "short",
    ],
)
def test_crafted_records_are_rejected_by_reason(record: bytes, reason: str | None) -> None:
    stage = analyzer()
    assert stage.offer(sealed(record)) == reason
    expected = dict.fromkeys(REJECTION_REASONS, 0)
    if reason is not None:
        expected[reason] = 1
    assert stage.rejected == expected
    assert stage.n_received == (1 if reason is None else 0)


def test_transport_level_rejections_and_counts() -> None:
    stage = analyzer()
    good = [sealed(encode_record(ROUND, v, K, manifest_digest=MANIFEST_DIGEST)) for v in (0, 1, 2)]
    offers: list[tuple[bytes, str | None]] = [
        (good[0], None),
        (good[0], "duplicate"),
        (good[1][:-1], "wrong-length"),
        (
            wrap(
                encode_record(ROUND, 0, K, manifest_digest=MANIFEST_DIGEST),
                [HOPS[1].public],
                ANALYZER.public,
            ),
            "wrong-length",
        ),
        (
            wrap(encode_record(ROUND, 0, K, manifest_digest=MANIFEST_DIGEST), [], STRANGER.public),
            "decryption-failed",
        ),
        (bytes(LENGTH), "decryption-failed"),
        (good[1], None),
        (sealed(raw_record(value=K)), "value-out-of-range"),
        (good[2], None),
        (good[1], "duplicate"),
    ]
    for message, expected in offers:
        assert stage.offer(message) == expected
    assert stage.n_received == 3 == int(stage.histogram().sum())
    assert stage.rejected == {
        "wrong-length": 2,
        "decryption-failed": 2,
        "bad-version": 0,
        "wrong-manifest": 0,
        "wrong-round": 0,
        "value-out-of-range": 1,
        "duplicate": 2,
    }
    assert stage.n_received + sum(stage.rejected.values()) == len(offers)


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({"k": 1}, "k must be in [2, 4294967296], got 1"),
        ({"k": 2.0}, "k must be an integer, got 2.0"),
        ({"n_hops": 0}, "n_hops must be >= 1, got 0"),
        ({"round_id": -3}, "round_id must be in [0, 18446744073709551615], got -3"),
        ({"private_key": ANALYZER.public}, "private_key must be a nacl.public.PrivateKey"),
    ],
)
def test_constructor_names_the_rule_and_the_value(changes: dict[str, object], pattern: str) -> None:
    arguments: dict[str, object] = {
        "round_id": ROUND,
        "k": K,
        "n_hops": H,
        "private_key": ANALYZER.private,
    }
    arguments.update(changes)
    with pytest.raises(InvalidParameterError, match=re.escape(pattern)):
        AnalyzerRound(**arguments, manifest_digest=MANIFEST_DIGEST)  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.binary(max_size=3 * LENGTH), st.binary(min_size=LENGTH, max_size=LENGTH)))
def test_random_bytes_never_crash_the_analyzer(data: bytes) -> None:
    stage = analyzer()
    expected = "decryption-failed" if len(data) == LENGTH else "wrong-length"
    assert stage.offer(data) == expected
    assert stage.n_received == 0


# --- the report -------------------------------------------------------------------------------

REPORT_K = 5
REPORT_EPS0 = 2.0
TRUE = np.array([300, 100, 50, 30, 20])
NOISY = np.array([250, 110, 60, 45, 35])  # a plausible k-RR histogram of TRUE (n = 500)


def report(**changes: object) -> dict[str, Any]:
    """build_report's record as JSON (the contract consumers read), checked to read back into
    the same record."""
    arguments: dict[str, object] = {
        "round_id": 3,
        "k": REPORT_K,
        "eps0": REPORT_EPS0,
        "histogram": NOISY,
        "n_expected": 800,
        "rejected": {"wrong-length": 2, "duplicate": 1},
        "randomness_name": "seeded-pcg64(seed=5)",
    }
    arguments.update(changes)
    record = build_report(**arguments)  # type: ignore[arg-type]
    out = record.to_json()
    assert Report.from_json(json.dumps(out, allow_nan=False)) == record
    return out


@pytest.mark.slow
def test_report_contract_and_privacy_for_the_received_n() -> None:
    out = report(true_histogram=TRUE, baseline_rng=1)
    assert json.loads(json.dumps(out, allow_nan=False)) == out  # plain JSON, no NaN or inf
    assert out["round"] == 3 and out["n_expected"] == 800 and out["n_received"] == 500
    assert out["histogram"] == NOISY.tolist()
    assert out["rejected"] == {"wrong-length": 2, "duplicate": 1}
    assert out["estimator"] == "shuffle+INV"
    assert out["randomness"] == "seeded-pcg64(seed=5)"
    estimate = out["estimate"]
    assert isinstance(estimate, dict)
    expected = shuffle_inv(NOISY, REPORT_EPS0)
    assert estimate["distribution"] == pytest.approx(expected.tolist(), abs=1e-15)
    assert estimate["counts"] == pytest.approx((expected * 500).tolist(), rel=1e-12)
    assert min(estimate["distribution"]) >= 0 and math.isclose(sum(estimate["distribution"]), 1)
    privacy = out["privacy"]
    assert isinstance(privacy, dict)
    assert privacy["n"] == 500  # n_received, never n_expected = 800
    mech = ShuffledKRR(n=500, k=REPORT_K, eps0=REPORT_EPS0)
    inverted = eps_for_delta(Tight(), mech, 1e-6)
    assert privacy["eps"] == inverted.eps and privacy["eps_lower"] == inverted.eps_lower
    bracket = Tight().delta(mech, inverted.eps)
    assert privacy["delta"] == bracket.delta_upper <= 1e-6
    assert privacy["delta_lower"] == bracket.delta_lower <= privacy["delta"]
    assert privacy["bound"] == bracket.extra["upper_from"]
    assert privacy["target_delta"] == 1e-6
    # With n_expected = 800 the guarantee would be stronger: the report must not claim it.
    assert (
        eps_for_delta(Tight(), ShuffledKRR(n=800, k=REPORT_K, eps0=REPORT_EPS0), 1e-6).eps
        < (privacy["eps"])
    )


@pytest.mark.slow
def test_report_utility_section() -> None:
    out = report(true_histogram=TRUE, baseline_rng=7)
    truth = TRUE / TRUE.sum()
    tv = out["tv_distance"]
    assert isinstance(tv, dict)
    assert set(tv) == {"shuffle", "shuffle+INV", "IBU", "gaussian"}
    assert tv["shuffle"] == pytest.approx(tv_distance(NOISY / 500, truth), abs=1e-15)
    assert tv["shuffle+INV"] == pytest.approx(
        tv_distance(shuffle_inv(NOISY, REPORT_EPS0), truth), abs=1e-15
    )
    assert tv["IBU"] == pytest.approx(tv_distance(krr_mle(NOISY, REPORT_EPS0), truth), abs=1e-6)
    assert out["IBU_method"] == IBU_METHOD_EM
    assert all(isinstance(v, float) and 0 <= v <= 1 for v in tv.values())
    assert out["true_histogram"] == TRUE.tolist()
    baseline = out["baseline"]
    privacy = out["privacy"]
    assert isinstance(baseline, dict) and isinstance(privacy, dict)
    assert (baseline["eps"], baseline["delta"]) == (privacy["eps"], privacy["delta"])
    # The baseline's noise comes from baseline_rng: the same seed gives the same release.
    assert report(true_histogram=TRUE, baseline_rng=7)["tv_distance"] == tv


def test_ibu_that_does_not_converge_falls_back_to_the_closed_form_mle() -> None:
    out = report(true_histogram=TRUE, baseline_rng=1, ibu_max_iter=1)
    assert out["IBU_method"] == IBU_METHOD_FALLBACK
    tv = out["tv_distance"]
    assert isinstance(tv, dict)
    assert tv["IBU"] == tv_distance(krr_mle(NOISY, REPORT_EPS0), TRUE / TRUE.sum())


def test_report_at_a_given_eps_gives_the_delta_bracket() -> None:
    out = report(eps=1.0)
    privacy = out["privacy"]
    assert isinstance(privacy, dict)
    bracket = Tight().delta(ShuffledKRR(n=500, k=REPORT_K, eps0=REPORT_EPS0), 1.0)
    assert privacy["eps"] == 1.0
    assert privacy["delta"] == bracket.delta_upper and privacy["delta_lower"] == bracket.delta_lower
    assert privacy["mode"] == "delta at given eps" and "target_delta" not in privacy


def test_gaussian_needs_a_positive_delta() -> None:
    """At eps >= eps0 k-RR alone gives delta = 0, where no Gaussian is private: no crash."""
    out = report(eps=REPORT_EPS0, true_histogram=TRUE)
    privacy, tv, baseline = out["privacy"], out["tv_distance"], out["baseline"]
    assert isinstance(privacy, dict) and isinstance(tv, dict) and isinstance(baseline, dict)
    assert privacy["delta"] == 0.0
    assert tv["gaussian"] is None and "not computed" in baseline["note"]
    json.dumps(out, allow_nan=False)


@pytest.mark.parametrize("received", [0, 1])
def test_fewer_than_two_reports_say_why_there_is_no_guarantee(received: int) -> None:
    histogram = np.zeros(REPORT_K, dtype=np.int64)
    histogram[2] = received
    out = report(histogram=histogram, true_histogram=TRUE)
    json.dumps(out, allow_nan=False)
    privacy = out["privacy"]
    assert isinstance(privacy, dict)
    assert privacy["eps"] is None and privacy["delta"] is None and privacy["n"] == received
    assert f"n_received = {received}" in privacy["error"]
    estimate, tv = out["estimate"], out["tv_distance"]
    assert isinstance(estimate, dict) and isinstance(tv, dict)
    assert tv["gaussian"] is None
    if received == 0:
        assert estimate["distribution"] is None and tv["shuffle+INV"] is None
    else:
        assert estimate["distribution"] is not None and tv["shuffle+INV"] is not None


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({"histogram": [1, 2, 3]}, "histogram must be one-dimensional with k = 5 bins"),
        ({"histogram": [1, 2, 3, 4, -1]}, "histogram must hold counts >= 0"),
        ({"histogram": [1, 2, 3, 4, 0.5]}, "histogram must hold integer counts"),
        ({"true_histogram": [1, 2]}, "true_histogram must be one-dimensional with k = 5 bins"),
        ({"rejected": {"duplicate": -1}}, "rejected['duplicate'] must be an integer >= 0"),
        ({"target_delta": 1.0}, "delta must be in (0, 1)"),
        ({"eps": -1.0}, "eps must be >= 0"),
        ({"eps0": 0.0}, "eps0 must be > 0"),
        ({"randomness_name": ""}, "randomness_name must be a non-empty string"),
    ],
)
def test_report_validation(changes: dict[str, object], pattern: str) -> None:
    with pytest.raises(InvalidParameterError, match=re.escape(pattern)):
        report(**changes)


def test_merge_rejected_sums_by_reason() -> None:
    merged = merge_rejected({"a": 1, "b": 0}, {"b": 2, "c": 3}, {"a": 4})
    assert merged == {"a": 5, "b": 2, "c": 3}


def test_a_copy_is_a_duplicate_after_the_seen_set_spills_to_disk() -> None:
    """seen_in_memory=2: the copies find their first copy on disk; the answers, counts and
    histogram equal those of an analyzer whose seen-set stays in memory, and are known: 5
    reports counted once each, 4 copies refused as duplicate."""
    values = [0, 1, 1, 5, 3]
    reports = [
        sealed(encode_record(ROUND, value, K, manifest_digest=MANIFEST_DIGEST)) for value in values
    ]
    stream = [*reports, reports[0], reports[3], reports[4], reports[0]]

    def run(**extra: int) -> tuple[list[str | None], dict[str, int], list[int]]:
        stage = AnalyzerRound(
            round_id=ROUND,
            k=K,
            n_hops=H,
            private_key=ANALYZER.private,
            manifest_digest=MANIFEST_DIGEST,
            **extra,
        )
        results = stage.offer_many(stream[:6]) + [stage.offer(m) for m in stream[6:]]
        return results, stage.rejected, stage.histogram().tolist()

    spilled = run(seen_in_memory=2)
    assert spilled == run()
    results, rejected, histogram = spilled
    assert results == [None] * 5 + ["duplicate"] * 4
    assert rejected == {**dict.fromkeys(REJECTION_REASONS, 0), "duplicate": 4}
    assert histogram == [1, 2, 0, 1, 0, 1]
