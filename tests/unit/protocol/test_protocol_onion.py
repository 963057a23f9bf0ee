"""Onion layers (shuffledp.protocol.onion): round trips, exact lengths, and rejection of anything
that is not a well-formed message for the stage that peels it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol import (
    RECORD_SIZE,
    SEAL_OVERHEAD,
    DecryptionFailed,
    KeyPair,
    Record,
    RejectedMessage,
    WrongLength,
    decode_record,
    encode_record,
    generate_keypair,
    message_length,
    peel,
    private_key_from_bytes,
    private_key_to_bytes,
    public_key_from_bytes,
    public_key_to_bytes,
    wrap,
)
from tests.binding import MANIFEST_DIGEST

MAX_HOPS = 5
HOPS = [generate_keypair() for _ in range(MAX_HOPS)]
ANALYZER = generate_keypair()
STRANGER = generate_keypair()

# One fixed 3-hop onion for the property-based corruption tests.
ONION_H = 3
RECORD = encode_record(42, 7, 10, manifest_digest=MANIFEST_DIGEST)
ONION = wrap(RECORD, [kp.public for kp in HOPS[:ONION_H]], ANALYZER.public)
ONION_LENGTH = message_length(0, ONION_H)


def stages(n_hops: int) -> list[KeyPair]:
    """Key pairs of stages 0..n_hops (hops, then the analyzer)."""
    return [*HOPS[:n_hops], ANALYZER]


def peel_all(ciphertext: bytes, n_hops: int) -> list[bytes]:
    """Every intermediate: what each stage receives, then the record the analyzer recovers."""
    seen = [ciphertext]
    for index, pair in enumerate(stages(n_hops)):
        seen.append(peel(seen[-1], pair.private, expected_length=message_length(index, n_hops)))
    return seen


# ---- lengths -----------------------------------------------------------------------------------


def test_sealed_box_overhead_is_48_bytes() -> None:
    assert SEAL_OVERHEAD == 48
    assert len(wrap(b"x" * 17, [], ANALYZER.public)) == 17 + 48


def test_message_length_formula() -> None:
    assert RECORD_SIZE == 64  # record version 2: 32 bytes of manifest digest more than v1
    assert [message_length(i, 3) for i in range(4)] == [256, 208, 160, 112]
    assert message_length(0, 0) == 112
    assert message_length(1, 1, record_size=0) == 48


@pytest.mark.parametrize(
    ("hop_index", "n_hops", "rule"),
    [
        (4, 3, r"hop_index must be in \[0, n_hops\] = \[0, 3\], got 4"),
        (-1, 3, "hop_index must be >= 0, got -1"),
        (0, -1, "n_hops must be >= 0, got -1"),
        (0, True, "n_hops must be an integer"),
    ],
)
def test_message_length_rejects_bad_parameters(hop_index: int, n_hops: int, rule: str) -> None:
    with pytest.raises(InvalidParameterError, match=rule):
        message_length(hop_index, n_hops)


# ---- round trips -------------------------------------------------------------------------------


@pytest.mark.parametrize("n_hops", [1, 2, 3, 5])
def test_wrap_peel_round_trip_with_exact_lengths(n_hops: int) -> None:
    record = encode_record(2026, 3, 5, manifest_digest=MANIFEST_DIGEST)
    onion = wrap(record, [kp.public for kp in HOPS[:n_hops]], ANALYZER.public)
    seen = peel_all(onion, n_hops)
    assert seen[-1] == record
    assert [len(c) for c in seen[:-1]] == [message_length(i, n_hops) for i in range(n_hops + 1)]
    assert len(seen[-1]) == RECORD_SIZE
    assert decode_record(
        seen[-1], expected_round=2026, k=5, manifest_digest=MANIFEST_DIGEST
    ) == Record(round_id=2026, value=3)


@given(payload=st.binary(min_size=0, max_size=100), n_hops=st.integers(0, MAX_HOPS))
def test_round_trip_of_any_payload(payload: bytes, n_hops: int) -> None:
    onion = wrap(payload, [kp.public for kp in HOPS[:n_hops]], ANALYZER.public)
    assert len(onion) == message_length(0, n_hops, record_size=len(payload))
    stage_input = onion
    for index, pair in enumerate(stages(n_hops)):
        expected = message_length(index, n_hops, record_size=len(payload))
        stage_input = peel(stage_input, pair.private, expected_length=expected)
    assert stage_input == payload


def test_two_wraps_differ_but_both_peel() -> None:
    keys = [kp.public for kp in HOPS[:ONION_H]]
    a, b = wrap(RECORD, keys, ANALYZER.public), wrap(RECORD, keys, ANALYZER.public)
    assert a != b
    inner_a, inner_b = peel_all(a, ONION_H), peel_all(b, ONION_H)
    # Fresh ephemeral keys in every layer: no intermediate repeats, not even a prefix of one.
    for x, y in zip(inner_a[:-1], inner_b[:-1], strict=True):
        assert x[:32] != y[:32]
    assert inner_a[-1] == inner_b[-1] == RECORD


# ---- rejections --------------------------------------------------------------------------------


def test_wrong_key_fails_decryption() -> None:
    for wrong in [STRANGER, HOPS[1], ANALYZER]:
        with pytest.raises(DecryptionFailed) as info:
            peel(ONION, wrong.private, expected_length=ONION_LENGTH)
        assert info.value.reason == "decryption-failed"


def test_skipping_a_hop_is_caught_by_length() -> None:
    with pytest.raises(WrongLength, match=r"must be 208 bytes at this stage, got 256") as info:
        peel(ONION, HOPS[1].private, expected_length=message_length(1, ONION_H))
    assert info.value.reason == "wrong-length"


@given(cut=st.integers(0, ONION_LENGTH - 1))
def test_truncated_ciphertext_is_wrong_length(cut: int) -> None:
    with pytest.raises(WrongLength, match=rf"must be {ONION_LENGTH} bytes .* got {cut}"):
        peel(ONION[:cut], HOPS[0].private, expected_length=ONION_LENGTH)


@given(extra=st.binary(min_size=1, max_size=64))
def test_lengthened_ciphertext_is_wrong_length(extra: bytes) -> None:
    with pytest.raises(WrongLength):
        peel(ONION + extra, HOPS[0].private, expected_length=ONION_LENGTH)


@given(bit=st.integers(0, 8 * ONION_LENGTH - 1))
def test_any_bit_flip_fails_decryption(bit: int) -> None:
    # Including the ephemeral key's top bit, which X25519 ignores: it still changes the nonce.
    corrupted = bytearray(ONION)
    corrupted[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(DecryptionFailed):
        peel(bytes(corrupted), HOPS[0].private, expected_length=ONION_LENGTH)


@given(bit=st.integers(0, 8 * message_length(1, ONION_H) - 1))
def test_corruption_between_hops_is_caught_by_the_next_hop(bit: int) -> None:
    forwarded = bytearray(peel(ONION, HOPS[0].private, expected_length=ONION_LENGTH))
    forwarded[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(DecryptionFailed):
        peel(bytes(forwarded), HOPS[1].private, expected_length=message_length(1, ONION_H))


@given(data=st.binary(min_size=0, max_size=2 * ONION_LENGTH))
def test_arbitrary_bytes_raise_only_the_two_rejections(data: bytes) -> None:
    try:
        peel(data, HOPS[0].private, expected_length=ONION_LENGTH)
    except RejectedMessage as exc:
        expected = WrongLength if len(data) != ONION_LENGTH else DecryptionFailed
        assert type(exc) is expected
    else:  # a forgery would need a valid Poly1305 tag: probability 2^-128 per try
        pytest.fail("arbitrary bytes opened as a sealed box")


@given(data=st.binary(min_size=ONION_LENGTH, max_size=ONION_LENGTH), low_order=st.booleans())
def test_right_length_garbage_fails_decryption(data: bytes, low_order: bool) -> None:
    if low_order:  # ephemeral key of low order (all zeros): libsodium refuses it
        data = bytes(32) + data[32:]
    with pytest.raises(DecryptionFailed):
        peel(data, HOPS[0].private, expected_length=ONION_LENGTH)


def test_peel_rejects_impossible_expected_length() -> None:
    with pytest.raises(InvalidParameterError, match="expected_length must be >= 48, got 47"):
        peel(bytes(47), HOPS[0].private, expected_length=47)


# ---- keys --------------------------------------------------------------------------------------


def test_key_serialisation_round_trip() -> None:
    pair = generate_keypair()
    raw_public, raw_private = public_key_to_bytes(pair.public), private_key_to_bytes(pair.private)
    assert len(raw_public) == len(raw_private) == 32
    assert raw_public != raw_private
    public, private = public_key_from_bytes(raw_public), private_key_from_bytes(raw_private)
    assert public == pair.public and private.public_key == pair.public
    # Keys loaded from their bytes work like the originals, in both directions.
    onion = wrap(RECORD, [public], ANALYZER.public)
    assert len(peel(onion, pair.private, expected_length=message_length(0, 1))) == 112
    onion = wrap(RECORD, [pair.public], ANALYZER.public)
    assert len(peel(onion, private, expected_length=message_length(0, 1))) == 112


def test_fresh_keypairs_differ_and_private_key_is_not_in_repr() -> None:
    a, b = generate_keypair(), generate_keypair()
    assert public_key_to_bytes(a.public) != public_key_to_bytes(b.public)
    assert "private" not in repr(a)  # the secret field stays out of logs


@pytest.mark.parametrize("size", [0, 31, 33, 64])
def test_keys_of_the_wrong_size_are_refused(size: int) -> None:
    with pytest.raises(InvalidParameterError, match=rf"public key must be 32 bytes, got {size}"):
        public_key_from_bytes(bytes(range(size)))
    with pytest.raises(InvalidParameterError, match=rf"private key must be 32 bytes, got {size}"):
        private_key_from_bytes(bytes(range(size)))


@pytest.mark.parametrize(
    "raw",
    [
        bytes(32),  # u = 0
        b"\x01" + bytes(31),  # u = 1
        # a point of order 8
        bytes.fromhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
    ],
)
def test_low_order_public_keys_are_refused_at_load(raw: bytes) -> None:
    with pytest.raises(InvalidParameterError, match="not of low order"):
        public_key_from_bytes(raw)
