"""One full round in memory: clients -> H hops -> analyzer -> report, with real onion encryption.

What is checked:
- every report arrives exactly once (the analyzer's histogram is exactly the histogram of the
  k-RR reports the clients drew), the report's privacy is computed for n_received;
- the shuffle+INV estimate is within a bound on its TV distance that fails with probability at most
  1e-6 (derivation in ``tv_bound``);
- the order in which the analyzer receives the reports does not depend on the order clients sent
  them (chi-square tests, total false-alarm rate 1e-6);
- with 10% malformed and duplicate messages injected at hop 0, the analyzer still counts exactly n
  and the report lists the rejections by reason.

The k-RR draws and the permutations of the main run are seeded (``SeededRandom``), so that run is
reproducible; its bound holds with probability >= 1 - 1e-6 over the seed. The order test uses the
hops' default OS CSPRNG, so its false-alarm rate is real.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pytest
from scipy.stats import chi2, chisquare

from shuffledp.analyzer import tv_distance
from shuffledp.analyzer.records import Report
from shuffledp.analyzer.report import build_report, merge_rejected
from shuffledp.analyzer.round import AnalyzerRound
from shuffledp.clients.client import make_client_messages
from shuffledp.clients.krr import krr_randomize
from shuffledp.protocol import (
    REJECTION_REASONS,
    decode_record,
    encode_record,
    generate_keypair,
    message_length,
    peel,
    wrap,
)
from shuffledp.randomness import RandomSource, SeededRandom
from shuffledp.shuffler.hop import BATCH_FULL, HopOutput, HopRound
from tests.binding import MANIFEST_DIGEST
from tests.stats import tv_bound

ALPHA = 1e-6  # false-alarm rate of each statistical test in this file
N = 2_000
K = 15
EPS0 = 4.0
H = 3
ROUND = 42
KRR_SEED = 20261201
HOPS = [generate_keypair() for _ in range(H)]
ANALYZER = generate_keypair()


def true_counts(n: int, k: int) -> npt.NDArray[np.int64]:
    """A fixed, clearly non-uniform histogram: weights 0.7^j, rounded to sum n (largest
    remainders). For N, K: [603, 422, 295, 207, 145, 101, 71, 50, 35, 24, 17, 12, 8, 6, 4]."""
    weights = 0.7 ** np.arange(k)
    raw = weights / weights.sum() * n
    counts: npt.NDArray[np.int64] = np.floor(raw).astype(np.int64)
    counts[np.argsort(-(raw - counts), kind="stable")[: n - int(counts.sum())]] += 1
    return counts


TRUE = true_counts(N, K)
VALUES = np.repeat(np.arange(K), TRUE)


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundResult:
    hops: list[HopOutput]
    analyzer: AnalyzerRound


def run_round(
    client_messages: list[bytes], *, expected_size: int, hop_rngs: list[RandomSource | None]
) -> RoundResult:
    """Feed the messages to hop 0, each hop's release to the next, the last one's to the
    analyzer, in order (the in-memory transport)."""
    messages = client_messages
    outputs: list[HopOutput] = []
    for index, (kp, rng) in enumerate(zip(HOPS, hop_rngs, strict=True)):
        hop = HopRound(
            hop_index=index,
            n_hops=H,
            round_id=ROUND,
            private_key=kp.private,
            expected_size=expected_size,
            min_batch=expected_size // 2,
            rng=rng,
        )
        for message in messages:
            hop.offer(message)
        output = hop.close()
        outputs.append(output)
        messages = output.messages
    analyzer = AnalyzerRound(
        round_id=ROUND, k=K, n_hops=H, private_key=ANALYZER.private, manifest_digest=MANIFEST_DIGEST
    )
    for message in messages:
        analyzer.offer(message)
    return RoundResult(hops=outputs, analyzer=analyzer)


def client_messages() -> list[bytes]:
    return make_client_messages(
        VALUES,
        k=K,
        eps0=EPS0,
        round_id=ROUND,
        hop_public_keys=[kp.public for kp in HOPS],
        analyzer_public_key=ANALYZER.public,
        rng=SeededRandom(KRR_SEED),
        manifest_digest=MANIFEST_DIGEST,
    )


def expected_report_histogram() -> npt.NDArray[np.int64]:
    """The histogram of the k-RR reports the clients drew (same seed, same draws)."""
    reports = krr_randomize(VALUES, K, EPS0, SeededRandom(KRR_SEED))
    return np.bincount(reports, minlength=K).astype(np.int64)


@pytest.fixture(scope="module")
def clean_round() -> RoundResult:
    return run_round(
        client_messages(), expected_size=N, hop_rngs=[SeededRandom(100 + i) for i in range(H)]
    )


@pytest.mark.slow
def test_every_report_arrives_exactly_once(clean_round: RoundResult) -> None:
    for index, output in enumerate(clean_round.hops):
        assert output.accepted == N == output.forwarded
        assert output.rejected == {reason: 0 for reason in output.rejected}
        assert all(len(m) == message_length(index + 1, H) for m in output.messages)
    analyzer = clean_round.analyzer
    assert analyzer.n_received == N
    assert analyzer.rejected == dict.fromkeys(REJECTION_REASONS, 0)
    histogram = analyzer.histogram()
    assert int(histogram.sum()) == N
    # Exactly the multiset of reports the clients drew: none lost, none counted twice.
    assert histogram.tolist() == expected_report_histogram().tolist()


@pytest.mark.slow
def test_report_of_the_round(clean_round: RoundResult) -> None:
    analyzer = clean_round.analyzer
    report = build_report(
        round_id=ROUND,
        k=K,
        eps0=EPS0,
        histogram=analyzer.histogram(),
        n_expected=N,
        rejected=merge_rejected(*(o.rejected for o in clean_round.hops), analyzer.rejected),
        true_histogram=TRUE,
        baseline_rng=np.random.default_rng(9),
        randomness_name=SeededRandom(KRR_SEED).name,
    )
    privacy = report.privacy
    assert report.n_received == analyzer.n_received == privacy.n == N
    assert privacy.eps is not None and privacy.delta is not None and privacy.delta_lower is not None
    assert 0 < privacy.eps < EPS0 and 0 <= privacy.delta_lower <= privacy.delta <= 1e-6
    assert report.utility is not None
    # The round's report, written as JSON text and read back, is the same record.
    assert Report.from_json(json.dumps(report.to_json(), allow_nan=False)) == report
    tv = report.utility.tv_distance.to_json()
    bound = tv_bound(TRUE, EPS0, ALPHA)
    # The bound must be able to fail: an estimator that ignored the data and returned the uniform
    # distribution would be farther than the bound.
    assert bound < tv_distance(np.full(K, 1.0 / K), TRUE / N)
    assert tv["shuffle+INV"] <= bound, (tv, bound)
    assert set(tv) == {"shuffle", "shuffle+INV", "IBU", "gaussian"}


def permutation_table_p_value(table: npt.NDArray[np.int64]) -> float:
    """p-value of "every row of ``table`` is a uniform permutation matrix summed over rounds".

    ``table[a, b]`` counts rounds in which the item at position a (of n) went to position b; R
    rounds. For uniform permutations cov(table) = R / (n - 1) Q (x) Q (Q the centring projection
    of R^n), so (n - 1) / n times Pearson's statistic is asymptotically chi-square with (n - 1)^2
    df. Checked by simulation for n = 20, R = 1,000: mean 361.8 and variance 712 against 361 and
    722, and the 0.9 / 0.99 / 0.999 quantiles within sampling error over 4,000 replications.
    """
    n = table.shape[0]
    expected = float(table.sum()) / (n * n)
    statistic = float(((table - expected) ** 2).sum() / expected) * (n - 1) / n
    return float(chi2.sf(statistic, (n - 1) ** 2))


@pytest.mark.slow
def test_arrival_order_is_independent_of_sending_order() -> None:
    """n = 20 tagged clients (client i's record carries value i, k = 20, no k-RR) are run through
    the H hops with their default OS CSPRNG for R = 1,000 rounds; clients always send in the
    order 0..n-1. If the release order of the cascade is uniform, every client's position at the
    analyzer is uniform whatever its sending position.

    Cost: the onions are wrapped once and offered again in every round (each round is a fresh
    HopRound with a fresh seen-set, and a hop's permutation does not depend on the message
    bytes); so client i's message at each stage is the same bytes in every round, and tables
    built by peeling once identify it (peeling it again would give the same record).

    Tests, each at false-alarm ALPHA / (2 H + 3) (union: ALPHA):
    (a) chi-square goodness of fit of client 0's position at the analyzer over the n positions
        (df n - 1, 50 expected per cell);
    (b) the n x n table (sending position, position at the analyzer), see
        ``permutation_table_p_value``;
    (c) for each hop, the table (arrival position, release position): a cascade is uniform as
        soon as one hop is, so (b) alone would not see a biased hop behind an honest one;
    (d) end to end, and (e) for each hop, the cyclic gap (position of the second item - position
        of the first) mod n between the items sent (arriving) first and second: uniform on
        {1, ..., n - 1} for a uniform permutation (given the first's position, the second's is
        uniform on the others), chi-square with df n - 2. Tables (b, c) only see where single
        items go, which a uniformly random rotation would also pass; (d, e) reject it.
    Checked by hand against three faulty hops: never permuting, not permuting in 10% of rounds
    (caught by c), and a random rotation (caught by d, e).
    """
    n, rounds = 20, 1_000
    hop_keys = [kp.public for kp in HOPS]
    onions = [
        wrap(encode_record(ROUND, i, n, manifest_digest=MANIFEST_DIGEST), hop_keys, ANALYZER.public)
        for i in range(n)
    ]
    tags: list[dict[bytes, int]] = [{} for _ in range(H + 1)]  # per stage: bytes -> client
    for i, onion in enumerate(onions):
        inner = onion
        for stage, kp in enumerate(HOPS):
            tags[stage][inner] = i
            inner = peel(inner, kp.private, expected_length=message_length(stage, H))
        tags[H][inner] = i
        record = peel(inner, ANALYZER.private, expected_length=message_length(H, H))
        assert (
            decode_record(record, expected_round=ROUND, k=n, manifest_digest=MANIFEST_DIGEST).value
            == i
        )
    end_to_end = np.zeros((n, n), dtype=np.int64)  # [client = sending position, final position]
    per_hop = np.zeros((H, n, n), dtype=np.int64)  # [hop, arrival position, release position]
    gap = np.zeros(n, dtype=np.int64)  # end to end, clients 0 and 1
    gap_per_hop = np.zeros((H, n), dtype=np.int64)  # items arriving first and second
    positions = np.arange(n)
    for _ in range(rounds):
        messages = onions
        arrival = positions  # arrival[p] = client at position p of the hop's input
        for index, kp in enumerate(HOPS):
            hop = HopRound(
                hop_index=index,
                n_hops=H,
                round_id=ROUND,
                private_key=kp.private,
                expected_size=n,
                min_batch=n,
            )
            for message in messages:
                hop.offer(message)
            messages = hop.close().messages
            released = np.array([tags[index + 1][m] for m in messages])
            where_arrived = np.empty(n, dtype=np.int64)
            where_arrived[arrival] = positions
            per_hop[index, where_arrived[released], positions] += 1
            release_position = np.empty(n, dtype=np.int64)
            release_position[where_arrived[released]] = positions  # by arrival position
            gap_per_hop[index, (release_position[1] - release_position[0]) % n] += 1
            arrival = released
        assert sorted(arrival.tolist()) == list(range(n))  # each client exactly once
        end_to_end[arrival, positions] += 1
        final_position = np.empty(n, dtype=np.int64)
        final_position[arrival] = positions
        gap[(final_position[1] - final_position[0]) % n] += 1
    alpha = ALPHA / (2 * H + 3)
    assert chisquare(end_to_end[0]).pvalue > alpha
    assert permutation_table_p_value(end_to_end) > alpha
    assert gap[0] == 0 and chisquare(gap[1:]).pvalue > alpha
    for index in range(H):
        assert permutation_table_p_value(per_hop[index]) > alpha, f"hop {index}"
        assert gap_per_hop[index, 0] == 0
        assert chisquare(gap_per_hop[index, 1:]).pvalue > alpha, f"hop {index}"


@pytest.mark.slow
def test_injected_junk_at_hop_0_is_rejected_by_reason() -> None:
    """10% extra messages at hop 0: 50 truncated or extended, 50 bit-flipped and 50 random
    messages of the right length (decryption-failed), 50 exact copies of client messages
    (duplicate), interleaved at random. The analyzer still counts exactly the N reports."""
    genuine = client_messages()
    gen = np.random.default_rng(5)
    length = message_length(0, H)
    picks = gen.choice(N, size=150, replace=False)
    wrong_length = [
        genuine[int(i)][: length - 1 - int(j)] if j % 2 else genuine[int(i)] + bytes(int(j) + 1)
        for i, j in zip(picks[:50], gen.integers(0, 40, size=50), strict=True)
    ]
    flipped = []
    for i in picks[50:100]:
        data = bytearray(genuine[int(i)])
        bit = int(gen.integers(0, 8 * length))
        data[bit // 8] ^= 1 << (bit % 8)
        flipped.append(bytes(data))
    random_right_length = [os.urandom(length) for _ in range(50)]
    copies = [genuine[int(i)] for i in picks[100:150]]
    junk = wrong_length + flipped + random_right_length + copies
    stream = genuine + junk
    order = gen.permutation(len(stream))
    stream = [stream[int(i)] for i in order]
    # Keep one genuine message for last, so no junk arrives after the batch is full (junk that
    # arrives then is counted batch-full or by the cheaper check, see shuffler/hop.py).
    last = next(p for p in range(len(stream) - 1, -1, -1) if int(order[p]) < N)
    stream.append(stream.pop(last))

    result = run_round(stream, expected_size=N, hop_rngs=[SeededRandom(200 + i) for i in range(H)])
    hop0 = result.hops[0]
    assert hop0.accepted == N
    assert hop0.rejected == {
        "wrong-length": 50,
        "duplicate": 50,
        BATCH_FULL: 0,
        "decryption-failed": 100,
        "unknown-client": 0,  # client authentication is off in this test
        "bad-authenticator": 0,
        "client-already-reported": 0,
    }
    assert hop0.accepted + sum(hop0.rejected.values()) == len(stream) == N + len(junk)
    assert all(sum(o.rejected.values()) == 0 for o in result.hops[1:])
    analyzer = result.analyzer
    assert analyzer.n_received == N
    assert analyzer.histogram().tolist() == expected_report_histogram().tolist()
    report = build_report(
        round_id=ROUND,
        k=K,
        eps0=EPS0,
        histogram=analyzer.histogram(),
        n_expected=N,
        rejected=merge_rejected(*(o.rejected for o in result.hops), analyzer.rejected),
        randomness_name="seeded-pcg64",
    )
    assert report.n_received == report.privacy.n == N
    assert report.rejected["wrong-length"] == 50
    assert report.rejected["duplicate"] == 50
    assert report.rejected["decryption-failed"] == 100
    assert sum(report.rejected.values()) == len(junk)
    assert Report.from_json(report.to_json()) == report
