"""One shuffler hop, one round (shuffledp.shuffler.hop.HopRound): every rejection reason from its
own crafted input, counts that add up, the minimum batch, and a release that is exactly a
permutation of the peeled accepted messages. No statistical test here (the uniformity of the
order is tested end to end in test_round_in_memory.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.clients.client import make_client_messages
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol import (
    decode_record,
    generate_keypair,
    message_length,
    peel,
    wrap,
)
from shuffledp.protocol.record import encode_record
from shuffledp.protocol.seen_set import DEFAULT_IN_MEMORY
from shuffledp.randomness import RandomSource, SeededRandom
from shuffledp.shuffler.hop import (
    BATCH_FULL,
    HOP_REJECTION_REASONS,
    BatchTooSmall,
    HopOutput,
    HopRound,
    RoundClosedError,
)
from shuffledp.shuffler.permute import uniform_permutation
from tests.binding import MANIFEST_DIGEST

H = 3
K = 10
ROUND = 7
HOPS = [generate_keypair() for _ in range(H)]
ANALYZER = generate_keypair()
STRANGER = generate_keypair()
LENGTH = message_length(0, H)


def messages(n: int, *, seed: int = 1) -> list[bytes]:
    values = np.arange(n) % K
    return make_client_messages(
        values,
        k=K,
        eps0=2.0,
        round_id=ROUND,
        hop_public_keys=[kp.public for kp in HOPS],
        analyzer_public_key=ANALYZER.public,
        rng=SeededRandom(seed),
        manifest_digest=MANIFEST_DIGEST,
    )


POOL = messages(8)


def hop0(
    *, expected_size: int = 100, min_batch: int = 1, rng: RandomSource | None = None
) -> HopRound:
    return HopRound(
        hop_index=0,
        n_hops=H,
        round_id=ROUND,
        private_key=HOPS[0].private,
        expected_size=expected_size,
        min_batch=min_batch,
        rng=rng,
    )


def flip(message: bytes, bit: int) -> bytes:
    data = bytearray(message)
    data[bit // 8] ^= 1 << (bit % 8)
    return bytes(data)


def test_client_messages_have_the_stage_length_and_peel_to_their_records() -> None:
    msgs = messages(5)
    assert len(msgs) == 5 and all(len(m) == LENGTH for m in msgs)
    assert len(set(msgs)) == 5
    for message in msgs:
        inner = message
        for stage, kp in enumerate(HOPS):
            inner = peel(inner, kp.private, expected_length=message_length(stage, H))
        record = peel(inner, ANALYZER.private, expected_length=message_length(H, H))
        assert (
            decode_record(
                record, expected_round=ROUND, k=K, manifest_digest=MANIFEST_DIGEST
            ).round_id
            == ROUND
        )


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({"n_hops": 0}, "n_hops must be >= 1, got 0"),
        ({"hop_index": 3}, "hop_index must be in [0, n_hops - 1] = [0, 2], got 3"),
        ({"hop_index": -1}, "hop_index must be in [0, n_hops - 1] = [0, 2], got -1"),
        ({"hop_index": True}, "hop_index must be an integer, got True"),
        ({"round_id": -1}, "round_id must be in"),
        ({"round_id": 2**64}, "round_id must be in"),
        ({"expected_size": 0}, "expected_size must be >= 1, got 0"),
        ({"min_batch": 0}, "min_batch must be in [1, expected_size] = [1, 10], got 0"),
        ({"min_batch": 11}, "min_batch must be in [1, expected_size] = [1, 10], got 11"),
        ({"private_key": b"\x01" * 32}, "private_key must be a nacl.public.PrivateKey"),
        ({"rng": 42}, "rng must be a RandomSource"),
    ],
)
def test_constructor_names_the_rule_and_the_value(changes: dict[str, object], pattern: str) -> None:
    arguments: dict[str, object] = {
        "hop_index": 0,
        "n_hops": H,
        "round_id": ROUND,
        "private_key": HOPS[0].private,
        "expected_size": 10,
        "min_batch": 1,
    }
    arguments.update(changes)
    with pytest.raises(InvalidParameterError, match=re.escape(pattern)):
        HopRound(**arguments)  # type: ignore[arg-type]


def test_every_rejection_reason_from_its_own_input() -> None:
    hop = hop0(expected_size=3)
    m0, m1, m2, m3 = POOL[:4]
    flipped = flip(m1, 8 * 40 + 3)  # a bit inside the ciphertext body
    for_stranger = wrap(
        encode_record(ROUND, 1, K, manifest_digest=MANIFEST_DIGEST),
        [STRANGER.public, HOPS[1].public, HOPS[2].public],
        ANALYZER.public,
    )
    for_hop1 = peel(m2, HOPS[0].private, expected_length=LENGTH)  # a later stage's message
    offers: list[tuple[bytes, str | None]] = [
        (m0, None),
        (m0[:-1], "wrong-length"),  # truncated
        (m0 + b"\x00", "wrong-length"),  # extended
        (b"", "wrong-length"),
        (for_hop1, "wrong-length"),  # hop 1's length at hop 0
        (flipped, "decryption-failed"),  # corrupted: the Poly1305 tag fails
        (flipped, "duplicate"),  # exact duplicate of a rejected ciphertext: no second decryption
        (for_stranger, "decryption-failed"),  # right length, addressed to another key
        (m1, None),
        (m1, "duplicate"),  # exact duplicate, straight after
        (m2, None),
        (m0, "duplicate"),  # replay of an accepted message, later in the round
        (m3, BATCH_FULL),  # new and valid, but the batch holds expected_size = 3 already
        (m3, "duplicate"),
        (m3[:10], "wrong-length"),
    ]
    assert not hop.is_full
    for message, expected in offers:
        assert hop.offer(message) == expected, expected
    assert hop.is_full
    assert hop.accepted == 3
    assert hop.rejected == {
        "wrong-length": 5,
        "duplicate": 4,
        BATCH_FULL: 1,
        "decryption-failed": 2,
        # client authentication is off: its reasons exist and stay 0
        "unknown-client": 0,
        "bad-authenticator": 0,
        "client-already-reported": 0,
    }
    assert hop.offered == len(offers)
    output = hop.close()
    assert output.accepted == 3 and output.forwarded == 3
    assert output.accepted + sum(output.rejected.values()) == len(offers)
    assert set(output.rejected) == set(HOP_REJECTION_REASONS)


def test_all_reasons_start_at_zero() -> None:
    hop = hop0()
    for message in POOL:
        assert hop.offer(message) is None
    output = hop.close()
    assert output.rejected == dict.fromkeys(HOP_REJECTION_REASONS, 0)
    assert output.accepted == len(POOL)


def test_release_is_the_seeded_permutation_of_the_peeled_inputs() -> None:
    inputs = messages(50, seed=3)
    hop = hop0(expected_size=50, min_batch=50, rng=SeededRandom(11))
    for message in inputs:
        assert hop.offer(message) is None
    assert hop.is_full
    output = hop.close()
    peeled = [peel(m, HOPS[0].private, expected_length=LENGTH) for m in inputs]
    # Multiset equality: every accepted message exactly once, peeled, nothing else.
    assert sorted(output.messages) == sorted(peeled)
    assert all(len(m) == message_length(1, H) for m in output.messages)
    # The order is the permutation drawn from the hop's source, applied to the arrival order.
    order = uniform_permutation(50, SeededRandom(11))
    assert output.messages == [peeled[int(i)] for i in order]
    assert output.messages != peeled  # 1/50! chance of equality for this fixed seed: it is not


def test_close_below_min_batch_releases_nothing() -> None:
    hop = hop0(expected_size=10, min_batch=3)
    assert hop.offer(POOL[0]) is None
    assert hop.offer(POOL[1]) is None
    assert hop.offer(b"junk") == "wrong-length"  # rejections do not count towards the batch
    with pytest.raises(BatchTooSmall, match=r"min_batch = 3 .* it accepted 2") as info:
        hop.close()
    assert (info.value.accepted, info.value.min_batch, info.value.hop_index) == (2, 3, 0)
    assert hop.closed
    with pytest.raises(RoundClosedError, match="already closed"):
        hop.close()  # a refused batch cannot be released afterwards
    with pytest.raises(RoundClosedError, match="takes no offers"):
        hop.offer(POOL[2])


def test_min_batch_met_exactly_releases() -> None:
    hop = hop0(expected_size=10, min_batch=3)
    for message in POOL[:3]:
        assert hop.offer(message) is None
    assert not hop.is_full
    assert hop.close().forwarded == 3


def test_closed_round_refuses_offers() -> None:
    hop = hop0()
    assert hop.offer(POOL[0]) is None
    output = hop.close()
    assert isinstance(output, HopOutput) and output.forwarded == 1
    with pytest.raises(RoundClosedError, match="is closed"):
        hop.offer(POOL[1])
    with pytest.raises(RoundClosedError):
        hop.close()


def test_non_bytes_is_a_type_error_not_a_rejection() -> None:
    hop = hop0()
    with pytest.raises(TypeError, match="message must be bytes, got str"):
        hop.offer("text")  # type: ignore[arg-type]
    assert hop.offered == 0
    assert hop.offer(bytearray(POOL[0])) is None  # bytes-like is fine
    assert hop.offer(memoryview(POOL[0])) == "duplicate"


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.binary(max_size=4 * LENGTH), st.binary(min_size=LENGTH, max_size=LENGTH)))
def test_random_bytes_are_rejected_by_length_or_key(data: bytes) -> None:
    hop = hop0()
    expected = "decryption-failed" if len(data) == LENGTH else "wrong-length"
    assert hop.offer(data) == expected  # a forgery passing Poly1305 would take 2^-128 luck
    assert hop.accepted == 0 and hop.offered == 1


SEQUENCE_ITEM = st.one_of(
    st.sampled_from(POOL),
    st.binary(max_size=2 * LENGTH),
    st.binary(min_size=LENGTH, max_size=LENGTH),
    st.tuples(st.sampled_from(POOL), st.integers(0, 8 * LENGTH - 1)).map(lambda t: flip(*t)),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(SEQUENCE_ITEM, max_size=30))
def test_any_sequence_of_offers_is_counted_exactly(stream: list[bytes]) -> None:
    hop = hop0(expected_size=5)
    results = [hop.offer(message) for message in stream]
    assert all(r is None or r in HOP_REJECTION_REASONS for r in results)
    distinct_valid = len({m for m in stream if m in POOL})
    assert hop.accepted == min(distinct_valid, 5)
    assert hop.accepted + sum(hop.rejected.values()) == len(stream)
    right_length = [m for m in stream if len(m) == LENGTH]
    assert hop.rejected["duplicate"] == len(right_length) - len(set(right_length))
    assert hop.rejected["wrong-length"] == len(stream) - len(right_length)
    if hop.accepted:
        output = hop.close()
        peeled = {peel(m, HOPS[0].private, expected_length=LENGTH) for m in stream if m in POOL}
        assert set(output.messages) <= peeled
        assert len(set(output.messages)) == len(output.messages) == hop.accepted


def test_another_hops_key_does_not_open_hop_0_messages() -> None:
    hop = HopRound(
        hop_index=0,
        n_hops=H,
        round_id=ROUND,
        private_key=HOPS[1].private,
        expected_size=10,
        min_batch=1,
    )
    assert [hop.offer(m) for m in POOL[:3]] == ["decryption-failed"] * 3


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({"hop_public_keys": []}, "hop_public_keys must name at least one hop, got none"),
        ({"hop_public_keys": [b"\x01" * 32]}, "hop_public_keys[0] must be a nacl.public.PublicKey"),
        ({"analyzer_public_key": None}, "analyzer_public_key must be a nacl.public.PublicKey"),
        ({"round_id": 2**64}, "round_id must be in [0, 2^64), got 18446744073709551616"),
        ({"k": 1}, "k must be an integer in [2, 2^32], got 1"),
        ({"values": [0, K]}, f"values must be in [0, k) = [0, {K}), got {K}"),
        ({"eps0": 0.0}, "eps0 must be > 0, got 0.0"),
    ],
)
def test_client_parameters_are_validated(changes: dict[str, object], pattern: str) -> None:
    arguments: dict[str, object] = {
        "values": [0, 1],
        "k": K,
        "eps0": 1.0,
        "round_id": ROUND,
        "hop_public_keys": [kp.public for kp in HOPS],
        "analyzer_public_key": ANALYZER.public,
    }
    arguments.update(changes)
    values = arguments.pop("values")
    with pytest.raises(InvalidParameterError, match=re.escape(pattern)):
        make_client_messages(values, **arguments, manifest_digest=MANIFEST_DIGEST)  # type: ignore[arg-type]


def test_a_copy_is_a_duplicate_after_the_seen_set_spills_to_disk() -> None:
    """seen_in_memory=2: the seen-set spills every second digest, so the copies below find
    their first copy on disk; every answer, count and the released batch equal those of a hop
    whose seen-set stays in memory (the default holds far more than these 14 offers)."""
    pool = messages(6, seed=3)
    stream = [*pool, pool[0], pool[4], flip(pool[1], 9), flip(pool[1], 9), pool[5], pool[2]]
    stream += [pool[3], pool[0]]

    def run(seen_in_memory: int) -> tuple[list[str | None], dict[str, int], list[bytes]]:
        hop = HopRound(
            hop_index=0,
            n_hops=H,
            round_id=ROUND,
            private_key=HOPS[0].private,
            expected_size=100,
            min_batch=1,
            rng=SeededRandom(5),
            seen_in_memory=seen_in_memory,
        )
        results = hop.offer_many(stream[:9]) + [hop.offer(m) for m in stream[9:]]
        return results, hop.rejected, hop.close().messages

    spilled, in_memory = run(2), run(DEFAULT_IN_MEMORY)
    assert spilled == in_memory
    results, rejected, released = spilled
    assert (
        results == [None] * 6 + ["duplicate", "duplicate", "decryption-failed"] + ["duplicate"] * 5
    )
    assert rejected["duplicate"] == 7 and rejected["decryption-failed"] == 1
    assert len(released) == 6
