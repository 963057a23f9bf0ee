"""The fixed-size record, the rejection types and the topic names (shuffledp.protocol)."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol import (
    MAX_K,
    MAX_ROUND_ID,
    RECORD_SIZE,
    REJECTION_REASONS,
    REJECTION_TYPES,
    VERSION,
    BadVersion,
    Record,
    RejectedMessage,
    ValueOutOfRange,
    WrongLength,
    WrongManifest,
    WrongRound,
    analyzer_topic,
    decode_record,
    encode_record,
    ingress_topic,
    validate_prefix,
)
from tests.binding import MANIFEST_DIGEST, OTHER_DIGEST

round_ids = st.integers(min_value=0, max_value=MAX_ROUND_ID)


@st.composite
def k_and_value(draw: st.DrawFn) -> tuple[int, int]:
    k = draw(st.integers(min_value=2, max_value=MAX_K))
    return k, draw(st.integers(min_value=0, max_value=k - 1))


# ---- round trip --------------------------------------------------------------------------------


@given(round_id=round_ids, kv=k_and_value(), seed=st.integers(0, 2**32))
def test_round_trip(round_id: int, kv: tuple[int, int], seed: int) -> None:
    k, value = kv
    data = encode_record(
        round_id,
        value,
        k,
        padding_source=random.Random(seed).randbytes,
        manifest_digest=MANIFEST_DIGEST,
    )
    assert len(data) == RECORD_SIZE
    assert decode_record(
        data, expected_round=round_id, k=k, manifest_digest=MANIFEST_DIGEST
    ) == Record(round_id=round_id, value=value)


def test_layout_is_version_round_value_padding_big_endian() -> None:
    data = encode_record(
        0x0102030405060708,
        0x0A0B0C0D,
        MAX_K,
        padding_source=lambda n: b"\xee" * n,
        manifest_digest=MANIFEST_DIGEST,
    )
    assert data == (
        bytes([VERSION, 1, 2, 3, 4, 5, 6, 7, 8, 0x0A, 0x0B, 0x0C, 0x0D])
        + MANIFEST_DIGEST
        + b"\xee" * 19
    )
    assert VERSION == 2 and RECORD_SIZE == 64


def _record(version: int, round_id: int, value: int, digest: bytes = MANIFEST_DIGEST) -> bytes:
    """A record laid out by hand (version 2: 13 bytes of header, the digest, zero padding)."""
    return struct.pack(">BQI", version, round_id, value) + digest + bytes(RECORD_SIZE - 45)


def test_padding_is_fresh_and_not_checked() -> None:
    a = encode_record(5, 3, 10, manifest_digest=MANIFEST_DIGEST)
    b = encode_record(5, 3, 10, manifest_digest=MANIFEST_DIGEST)
    assert a[:45] == b[:45]
    assert a[45:] != b[45:]  # os.urandom: equal with probability 2^-152
    zeros = a[:45] + bytes(RECORD_SIZE - 45)
    assert decode_record(zeros, expected_round=5, k=10, manifest_digest=MANIFEST_DIGEST) == Record(
        round_id=5, value=3
    )


def test_extreme_values_round_trip() -> None:
    for round_id, value, k in [(0, 0, 2), (MAX_ROUND_ID, MAX_K - 1, MAX_K), (MAX_ROUND_ID, 1, 2)]:
        data = encode_record(round_id, value, k, manifest_digest=MANIFEST_DIGEST)
        assert (
            decode_record(data, expected_round=round_id, k=k, manifest_digest=MANIFEST_DIGEST).value
            == value
        )


# ---- rejections: each reason by its own type ---------------------------------------------------


def test_rejection_types_have_distinct_stable_slugs() -> None:
    assert REJECTION_REASONS == (
        "wrong-length",
        "decryption-failed",
        "bad-version",
        "wrong-manifest",
        "wrong-round",
        "value-out-of-range",
        "duplicate",
    )
    for kind in REJECTION_TYPES:
        assert issubclass(kind, RejectedMessage) and issubclass(kind, ValueError)


@given(length=st.integers(0, 200).filter(lambda n: n != RECORD_SIZE), byte=st.integers(0, 255))
def test_wrong_length(length: int, byte: int) -> None:
    with pytest.raises(WrongLength, match=rf"{RECORD_SIZE} bytes, got {length}") as info:
        decode_record(
            bytes([byte]) * length, expected_round=0, k=2, manifest_digest=MANIFEST_DIGEST
        )
    assert info.value.reason == "wrong-length"


@given(version=st.integers(0, 255).filter(lambda v: v != VERSION))
def test_bad_version(version: int) -> None:
    data = bytearray(encode_record(1, 0, 2, manifest_digest=MANIFEST_DIGEST))
    data[0] = version
    with pytest.raises(BadVersion, match=rf"must be {VERSION}, got {version}") as info:
        decode_record(bytes(data), expected_round=1, k=2, manifest_digest=MANIFEST_DIGEST)
    assert info.value.reason == "bad-version"


@given(sent=round_ids, expected=round_ids)
def test_wrong_round(sent: int, expected: int) -> None:
    data = encode_record(sent, 0, 2, manifest_digest=MANIFEST_DIGEST)
    if sent == expected:
        assert (
            decode_record(
                data, expected_round=expected, k=2, manifest_digest=MANIFEST_DIGEST
            ).round_id
            == sent
        )
        return
    with pytest.raises(WrongRound, match=rf"must be {expected}, got {sent}") as info:
        decode_record(data, expected_round=expected, k=2, manifest_digest=MANIFEST_DIGEST)
    assert info.value.reason == "wrong-round"


@given(k=st.integers(2, 1000), value=st.integers(0, 2**32 - 1))
def test_value_out_of_range(k: int, value: int) -> None:
    data = _record(VERSION, 9, value)
    if value < k:
        assert (
            decode_record(data, expected_round=9, k=k, manifest_digest=MANIFEST_DIGEST).value
            == value
        )
        return
    with pytest.raises(ValueOutOfRange, match=rf"\[0, {k}\), got {value}") as info:
        decode_record(data, expected_round=9, k=k, manifest_digest=MANIFEST_DIGEST)
    assert info.value.reason == "value-out-of-range"


def test_checks_run_in_order_length_version_manifest_round_value() -> None:
    bad_everything = _record(VERSION + 1, 8, 99, OTHER_DIGEST)
    with pytest.raises(BadVersion):
        decode_record(bad_everything, expected_round=7, k=2, manifest_digest=MANIFEST_DIGEST)
    with pytest.raises(WrongLength):
        decode_record(
            bad_everything + b"\x00", expected_round=7, k=2, manifest_digest=MANIFEST_DIGEST
        )
    with pytest.raises(WrongManifest):
        decode_record(
            _record(VERSION, 8, 99, OTHER_DIGEST),
            expected_round=7,
            k=2,
            manifest_digest=MANIFEST_DIGEST,
        )
    bad_round_and_value = _record(VERSION, 8, 99)
    with pytest.raises(WrongRound):
        decode_record(bad_round_and_value, expected_round=7, k=2, manifest_digest=MANIFEST_DIGEST)


@given(
    sent=st.binary(min_size=32, max_size=32),
    expected=st.binary(min_size=32, max_size=32),
    round_id=round_ids,
)
def test_wrong_manifest(sent: bytes, expected: bytes, round_id: int) -> None:
    """A record is taken under its own manifest only; any other digest is wrong-manifest."""
    data = encode_record(round_id, 1, 2, manifest_digest=sent)
    if sent == expected:
        record = decode_record(data, expected_round=round_id, k=2, manifest_digest=expected)
        assert record == Record(round_id=round_id, value=1)
        return
    with pytest.raises(WrongManifest, match="round manifest") as info:
        decode_record(data, expected_round=round_id, k=2, manifest_digest=expected)
    assert info.value.reason == "wrong-manifest"


def test_a_single_bit_of_the_digest_changes_the_manifest() -> None:
    data = encode_record(3, 1, 2, manifest_digest=MANIFEST_DIGEST)
    for bit in range(256):
        flipped = bytearray(data)
        flipped[13 + bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(WrongManifest):
            decode_record(bytes(flipped), expected_round=3, k=2, manifest_digest=MANIFEST_DIGEST)


@pytest.mark.parametrize(
    ("digest", "rule"),
    [
        (b"", "got 0 bytes"),
        (bytes(31), "got 31 bytes"),
        (bytes(33), "got 33 bytes"),
        ("00" * 32, "got '00"),
        (None, "got None"),
    ],
)
def test_a_digest_that_is_not_32_bytes_is_a_parameter_error(digest: object, rule: str) -> None:
    with pytest.raises(
        InvalidParameterError, match=rf"manifest_digest must be the 32-byte.*{rule}"
    ):
        encode_record(0, 0, 2, manifest_digest=digest)  # type: ignore[arg-type]
    with pytest.raises(
        InvalidParameterError, match=rf"manifest_digest must be the 32-byte.*{rule}"
    ):
        decode_record(bytes(RECORD_SIZE), expected_round=0, k=2, manifest_digest=digest)  # type: ignore[arg-type]


# ---- caller errors are not rejected messages ---------------------------------------------------


@pytest.mark.parametrize(
    ("round_id", "value", "k", "rule"),
    [
        (0, 2, 2, r"value must be in \[0, k\) = \[0, 2\), got 2"),
        (0, -1, 2, r"value must be in \[0, k\)"),
        (0, True, 2, "value must be an integer"),
        (-1, 0, 2, r"round_id must be in \[0, 2\^64\), got -1"),
        (2**64, 0, 2, r"round_id must be in \[0, 2\^64\)"),
        (0, 0, 1, r"k must be an integer in \[2, 2\^32\], got 1"),
        (0, 0, 2**32 + 1, r"k must be an integer in \[2, 2\^32\]"),
        (0, 0, 2.0, "k must be an integer"),
    ],
)
def test_encode_rejects_bad_parameters(round_id: int, value: int, k: int, rule: str) -> None:
    with pytest.raises(InvalidParameterError, match=rule) as info:
        encode_record(round_id, value, k, manifest_digest=MANIFEST_DIGEST)
    assert not isinstance(info.value, RejectedMessage)


def test_decode_rejects_bad_parameters_before_the_message() -> None:
    data = encode_record(0, 0, 2, manifest_digest=MANIFEST_DIGEST)
    with pytest.raises(InvalidParameterError, match="k must be"):
        decode_record(b"", expected_round=0, k=1, manifest_digest=MANIFEST_DIGEST)
    with pytest.raises(InvalidParameterError, match="expected_round must be"):
        decode_record(data, expected_round=-1, k=2, manifest_digest=MANIFEST_DIGEST)


def test_padding_source_of_the_wrong_size_is_refused() -> None:
    with pytest.raises(InvalidParameterError, match="padding_source must return 19 bytes"):
        encode_record(
            0, 0, 2, padding_source=lambda n: bytes(n - 1), manifest_digest=MANIFEST_DIGEST
        )


# ---- topics ------------------------------------------------------------------------------------


def test_topic_layout() -> None:
    assert ingress_topic("shuffledp", 7, 0) == "shuffledp/round/7/hop/0"
    assert ingress_topic("lab/run-1", 7, 2) == "lab/run-1/round/7/hop/2"
    assert analyzer_topic("lab/run-1", 7) == "lab/run-1/round/7/analyzer"


def test_topics_are_distinct_across_rounds_and_stages() -> None:
    topics = [ingress_topic("p", r, h) for r in range(12) for h in range(12)]
    topics += [analyzer_topic("p", r) for r in range(12)]
    assert len(set(topics)) == len(topics)


@pytest.mark.parametrize(
    ("prefix", "rule"),
    [
        ("", "non-empty"),
        ("a/+/b", r"wildcard '\+'"),
        ("a/#", "wildcard '#'"),
        ("#", "wildcard '#'"),
        ("/a", "empty levels"),
        ("a/", "empty levels"),
        ("a//b", "empty levels"),
        ("$SYS/x", r"must not start with '\$'"),
        ("a\x00b", "control characters"),
        ("a\nb", "control characters"),
        ("a\ud800", "UTF-8"),
        ("a" * 70_000, "at most"),
    ],
)
def test_bad_prefixes_are_refused(prefix: str, rule: str) -> None:
    with pytest.raises(InvalidParameterError, match=rule):
        validate_prefix(prefix)
    with pytest.raises(InvalidParameterError, match=rule):
        ingress_topic(prefix, 0, 0)
    with pytest.raises(InvalidParameterError, match=rule):
        analyzer_topic(prefix, 0)


def test_good_prefixes_pass_unchanged() -> None:
    for prefix in ["shuffledp", "a/b/c", "données/été", "x y", "a$b"]:
        assert validate_prefix(prefix) == prefix


@pytest.mark.parametrize(
    ("round_id", "hop_index", "rule"),
    [
        (-1, 0, r"round_id must be in \[0, 2\^64\), got -1"),
        (2**64, 0, r"round_id must be in \[0, 2\^64\)"),
        (True, 0, "round_id must be an integer"),
        (0, -1, r"hop_index must be in \[0, 2\^32\), got -1"),
        (0, 1.0, "hop_index must be an integer"),
    ],
)
def test_topic_numbers_are_validated(round_id: int, hop_index: int, rule: str) -> None:
    with pytest.raises(InvalidParameterError, match=rule):
        ingress_topic("p", round_id, hop_index)
