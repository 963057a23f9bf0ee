"""Hostile input (issue 5): property-based tests of the record decoder, of every stage's peel, and
of whole rounds through H = 1..3 hops and the analyzer with adversarial messages mixed in.

The adversary: anyone who can put bytes on a stage's input (a malicious client at hop 0; a
compromised broker or a malicious hop at any later stage). It sends random bytes, truncated or
lengthened onions, bit flips of real ciphertexts (also of a hop's real output), onions meant for
another stage, onions with one layer sealed to a stranger's key or with garbage under correct
outer layers, records of the wrong size, replays from another round (round r - 1 above all),
other versions, out-of-range values, and exact copies of anything present.

Stages are numbered 0..H: stage j < H is hop j (:class:`HopRound`), stage H the analyzer
(:class:`AnalyzerRound`). The test knows every private key, so it follows each message through
the round by peeling it itself (opening a sealed box is deterministic), and it knows, for each
message it builds, its *fate*: the one stage that must reject it and the reason, or that it is a
valid report the analyzer counts with its value. Exact copies get their fate from the rule of the
seen-set: of identical right-length ciphertexts at a stage, one keeps its fate and every other is
a ``duplicate`` there (which one depends on arrival order; the multiset of results does not).

Invariants checked (each could be false):

- decoder: for any bytes, the outcome is the one an independent byte-level oracle predicts (a
  record with the right round and value, or exactly the documented rejection type), never any
  other exception;
- per message: each stage returns, for every message, its predicted result (compared as
  multisets over identical byte strings), and counts each rejection once under its reason;
- per stage: accepted + sum(rejected) = offered; a hop releases exactly the test's own peels of
  the messages it accepted, each once; it refuses to release fewer than min_batch;
- per round: every message ends exactly once (rejected at one stage, or counted), so the
  rejections over all stages plus the analyzer's n_received equal the number of messages ever
  offered; the analyzer's histogram equals the histogram of the values of the valid distinct
  reports (copies of a valid report never count twice).

A forged but well-formed report injected after hop 0 (``forged-valid``) is a valid report to the
analyzer (hops cannot read records): this is what docs/threat-model.md calls a malicious hop
*replacing or adding* reports, detectable from the stage counts (a stage is offered more than its
predecessor forwarded), not prevented. The file runs in about 8 s on the 2-core machine.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, PublicKey, SealedBox

from shuffledp.analyzer.round import AnalyzerRound
from shuffledp.protocol import (
    RECORD_SIZE,
    REJECTION_REASONS,
    VERSION,
    BadVersion,
    DecryptionFailed,
    Duplicate,
    RejectedMessage,
    ValueOutOfRange,
    WrongLength,
    WrongManifest,
    WrongRound,
    decode_record,
    generate_keypair,
    message_length,
    wrap,
)
from shuffledp.protocol.screen import parallel_mapper
from shuffledp.randomness import SeededRandom
from shuffledp.shuffler.hop import HOP_REJECTION_REASONS, BatchTooSmall, HopRound
from tests.binding import MANIFEST_DIGEST

H_MAX = 3
K = 5
ROUND = 41
HOP_KEYS = [generate_keypair() for _ in range(H_MAX)]
ANALYZER = generate_keypair()
STRANGER = generate_keypair()
EXECUTOR = ThreadPoolExecutor(max_workers=2)

DUPLICATE = Duplicate.reason
WRONG_LENGTH = WrongLength.reason
DECRYPTION_FAILED = DecryptionFailed.reason

# --- the record decoder -----------------------------------------------------------------------

DECODER_REJECTIONS: dict[str, type[RejectedMessage]] = {
    t.reason: t for t in (WrongLength, BadVersion, WrongManifest, WrongRound, ValueOutOfRange)
}


def oracle_decoding(data: bytes, *, expected_round: int, k: int) -> int | str:
    """What decoding ``data`` must give, read byte by byte from the documented layout (version at
    0, round id at 1..8, value at 9..12, big-endian, manifest digest at 13..44; checks in the
    order length, version, manifest, round, value): the value of a valid record, else the reason
    slug of the first rule it breaks."""
    if len(data) != RECORD_SIZE:
        return WRONG_LENGTH
    if data[0] != VERSION:
        return BadVersion.reason
    if data[13:45] != MANIFEST_DIGEST:
        return WrongManifest.reason
    if int.from_bytes(data[1:9], "big") != expected_round:
        return WrongRound.reason
    value = int.from_bytes(data[9:13], "big")
    return value if value < k else ValueOutOfRange.reason


@st.composite
def record_like(draw: st.DrawFn) -> tuple[bytes, int, int]:
    """(bytes, expected_round, k): arbitrary bytes of any length, or a record near the valid one
    (each field right or arbitrary), possibly truncated or lengthened."""
    k = draw(st.one_of(st.integers(2, 20), st.integers(2, 2**32)))
    expected_round = draw(st.one_of(st.just(ROUND), st.integers(0, 2**64 - 1)))
    structured = (
        bytes([draw(st.one_of(st.just(VERSION), st.integers(0, 255)))])
        + draw(st.one_of(st.just(expected_round), st.integers(0, 2**64 - 1))).to_bytes(8, "big")
        + draw(st.one_of(st.integers(0, k - 1), st.integers(0, 2**32 - 1))).to_bytes(4, "big")
        + draw(st.one_of(st.just(MANIFEST_DIGEST), st.binary(min_size=32, max_size=32)))
        + draw(st.binary(min_size=RECORD_SIZE - 45, max_size=RECORD_SIZE - 45))
    )
    cut = draw(st.integers(0, RECORD_SIZE))
    data = draw(
        st.one_of(
            st.binary(max_size=3 * RECORD_SIZE),
            st.just(structured),
            st.just(structured[:cut]),
            st.binary(min_size=1, max_size=40).map(lambda extra: structured + extra),
        )
    )
    return data, expected_round, k


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(record_like())
def test_decoder_outcome_is_the_oracle_s_for_any_bytes(case: tuple[bytes, int, int]) -> None:
    """Any bytes decode to exactly what the byte-level oracle predicts: a Record of the expected
    round with the oracle's value, or the documented rejection type of the first broken rule
    (a RejectedMessage with that reason), never another exception."""
    data, expected_round, k = case
    expected = oracle_decoding(data, expected_round=expected_round, k=k)
    if isinstance(expected, int):
        record = decode_record(
            data, expected_round=expected_round, k=k, manifest_digest=MANIFEST_DIGEST
        )
        assert (record.round_id, record.value) == (expected_round, expected)
    else:
        with pytest.raises(RejectedMessage) as caught:
            decode_record(data, expected_round=expected_round, k=k, manifest_digest=MANIFEST_DIGEST)
        assert type(caught.value) is DECODER_REJECTIONS[expected]
        assert caught.value.reason == expected and str(caught.value)


# --- building hostile messages ---------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Fate:
    """Where a message ends: rejected at ``stage`` for ``reason``, or (``reason`` None) counted by
    the analyzer (stage H) with ``value``."""

    stage: int
    reason: str | None
    value: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Hostile:
    """A recipe for one adversarial message; ``build`` turns it into bytes and a Fate. Integer
    fields are reduced into range when the number of hops is known (so hypothesis can draw them
    before it draws H)."""

    kind: str
    entry: int  # the stage whose input it is put on (mod H + 1)
    stage: int = 0  # another stage: the one meant (other-stage) or broken (broken-layer, ...)
    length: int = 0  # a length, or a change of length
    bit: int = 0
    number: int = 0  # a round id, a version or a value, by kind
    source: int = 0  # which message present at the stage to derive from


STAGE = st.integers(0, H_MAX)
NUMBER = st.integers(0, 2**64 - 1)
SOURCE = st.integers(0, 64)

HOSTILE = st.one_of(
    st.builds(
        Hostile,
        kind=st.just("random"),
        entry=STAGE,
        length=st.one_of(st.just(-1), st.integers(0, 320)),  # -1: exactly the stage's length
    ),
    st.builds(
        Hostile,
        kind=st.just("resized"),
        entry=STAGE,
        length=st.one_of(st.integers(-400, -1), st.integers(1, 100)),
        source=SOURCE,
    ),
    st.builds(
        Hostile, kind=st.just("bit-flip"), entry=STAGE, bit=st.integers(0, 2**16), source=SOURCE
    ),
    st.builds(Hostile, kind=st.just("other-stage"), entry=STAGE, stage=STAGE),
    st.builds(Hostile, kind=st.just("broken-layer"), entry=STAGE, stage=STAGE),
    st.builds(Hostile, kind=st.just("garbage-inside"), entry=STAGE, stage=STAGE),
    st.builds(
        Hostile,
        kind=st.just("wrong-round"),
        entry=STAGE,
        number=st.one_of(st.just(ROUND - 1), NUMBER),
    ),
    st.builds(Hostile, kind=st.just("bad-version"), entry=STAGE, number=st.integers(0, 255)),
    st.builds(Hostile, kind=st.just("wrong-manifest"), entry=STAGE, number=NUMBER),
    st.builds(
        Hostile,
        kind=st.just("value-out-of-range"),
        entry=STAGE,
        number=st.one_of(st.integers(0, 3), NUMBER),
    ),
    st.builds(
        Hostile,
        kind=st.just("record-size"),
        entry=STAGE,
        length=st.one_of(st.integers(0, RECORD_SIZE - 1), st.integers(RECORD_SIZE + 1, 100)),
    ),
    st.builds(Hostile, kind=st.just("forged-valid"), entry=STAGE, number=NUMBER),
    st.builds(Hostile, kind=st.just("copy"), entry=STAGE, source=SOURCE),
)


def stage_keys(n_hops: int, *, stranger_at: int | None = None) -> list[PublicKey]:
    """The public key of every stage 0..H (hops, then the analyzer); stage ``stranger_at``'s
    replaced by a key nobody in the round holds."""
    keys = [kp.public for kp in HOP_KEYS[:n_hops]] + [ANALYZER.public]
    if stranger_at is not None:
        keys[stranger_at] = STRANGER.public
    return keys


def stage_private_key(stage: int, n_hops: int) -> PrivateKey:
    return ANALYZER.private if stage == n_hops else HOP_KEYS[stage].private


def raw_record(
    *,
    version: int = VERSION,
    round_id: int = ROUND,
    value: int = 0,
    size: int = RECORD_SIZE,
    digest: bytes = MANIFEST_DIGEST,
) -> bytes:
    """A record laid out byte by byte (not with the encoder, which refuses bad fields), random
    padding, cut or lengthened to ``size`` bytes."""
    data = bytes([version]) + round_id.to_bytes(8, "big") + value.to_bytes(4, "big") + digest
    data += os.urandom(RECORD_SIZE - len(data))
    return data[:size] + os.urandom(max(0, size - RECORD_SIZE))


def onion_at(record: bytes, entry: int, n_hops: int, *, stranger_at: int | None = None) -> bytes:
    """The message stage ``entry`` receives for ``record``: sealed to the analyzer, then to hops
    H-1 down to ``entry`` (the layer of stage ``stranger_at`` sealed to the stranger)."""
    keys = stage_keys(n_hops, stranger_at=stranger_at)
    return wrap(record, keys[entry:n_hops], keys[n_hops])


def garbage_under(entry: int, broken: int, n_hops: int) -> bytes:
    """Random bytes of stage ``broken``'s exact length under correct layers of hops
    ``entry .. broken - 1``: every stage before ``broken`` opens it, ``broken`` cannot."""
    ciphertext = os.urandom(message_length(broken, n_hops))
    for hop in reversed(range(entry, broken)):
        ciphertext = SealedBox(HOP_KEYS[hop].public).encrypt(ciphertext)
    return ciphertext


def opens(box: SealedBox[PrivateKey], data: bytes) -> bool:
    """Whether ``data`` opens with the box's private key (the test's own check)."""
    try:
        box.decrypt(data)
    except CryptoError:
        return False
    return True


def flip(data: bytes, bit: int) -> bytes:
    out = bytearray(data)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


def build(
    spec: Hostile, stage: int, n_hops: int, present: list[tuple[Fate, bytes]]
) -> tuple[Fate, bytes] | None:
    """The message of ``spec`` put on stage ``stage``'s input and its fate, given the messages
    ``present`` there already (copies and derived messages are taken from them); None for a copy
    when nothing is present."""
    length = message_length(stage, n_hops)
    analyzer_stage = n_hops
    right_length = [data for _, data in present if len(data) == length]

    def base(candidates: list[bytes]) -> bytes:
        """A right-length ciphertext at this stage: one of ``candidates`` (real traffic), else a
        fresh valid onion."""
        if candidates:
            return candidates[spec.source % len(candidates)]
        return onion_at(raw_record(), stage, n_hops)

    later = spec.stage % (n_hops + 1 - stage) + stage  # a stage in [stage, H]
    if spec.kind == "random":
        data = os.urandom(length if spec.length < 0 else spec.length)
        fate = Fate(stage=stage, reason=DECRYPTION_FAILED if len(data) == length else WRONG_LENGTH)
    elif spec.kind == "resized":
        original = base(right_length)
        data = (
            original[: max(0, length + spec.length)]
            if spec.length < 0
            else original + os.urandom(spec.length)
        )
        fate = Fate(stage=stage, reason=WRONG_LENGTH)
    elif spec.kind == "bit-flip":
        # Flip a bit of a message that opens here (its tag then surely fails), not of any
        # present one: flipping the same bit of a flipped message would restore a valid one.
        opener = SealedBox(stage_private_key(stage, n_hops))
        data = flip(base([m for m in right_length if opens(opener, m)]), spec.bit % (8 * length))
        fate = Fate(stage=stage, reason=DECRYPTION_FAILED)
    elif spec.kind == "other-stage":
        meant = spec.stage % (n_hops + 1)
        meant = meant if meant != stage else (stage + 1) % (n_hops + 1)
        data = onion_at(raw_record(), meant, n_hops)
        fate = Fate(stage=stage, reason=WRONG_LENGTH)
    elif spec.kind == "broken-layer":
        data = onion_at(raw_record(), stage, n_hops, stranger_at=later)
        fate = Fate(stage=later, reason=DECRYPTION_FAILED)
    elif spec.kind == "garbage-inside":
        data = garbage_under(stage, later, n_hops)
        fate = Fate(stage=later, reason=DECRYPTION_FAILED)
    elif spec.kind == "wrong-round":
        other_round = spec.number if spec.number != ROUND else ROUND - 1
        data = onion_at(raw_record(round_id=other_round, value=1), stage, n_hops)
        fate = Fate(stage=analyzer_stage, reason=WrongRound.reason)
    elif spec.kind == "wrong-manifest":
        digest = hashlib.sha256(spec.number.to_bytes(8, "big")).digest()
        data = onion_at(raw_record(digest=digest), stage, n_hops)
        fate = Fate(stage=analyzer_stage, reason=WrongManifest.reason)
    elif spec.kind == "bad-version":
        version = spec.number if spec.number != VERSION else VERSION + 1
        data = onion_at(raw_record(version=version), stage, n_hops)
        fate = Fate(stage=analyzer_stage, reason=BadVersion.reason)
    elif spec.kind == "value-out-of-range":
        value = K + spec.number % (2**32 - K)
        data = onion_at(raw_record(value=value), stage, n_hops)
        fate = Fate(stage=analyzer_stage, reason=ValueOutOfRange.reason)
    elif spec.kind == "record-size":
        data = onion_at(raw_record(size=spec.length), stage, n_hops)
        fate = Fate(stage=stage, reason=WRONG_LENGTH)
    elif spec.kind == "forged-valid":
        value = spec.number % K
        data = onion_at(raw_record(value=value), stage, n_hops)
        fate = Fate(stage=analyzer_stage, reason=None, value=value)
    elif spec.kind == "copy":
        if not present:
            return None
        _, data = present[spec.source % len(present)]
        fate = Fate(stage=stage, reason=DUPLICATE if len(data) == length else WRONG_LENGTH)
    else:  # pragma: no cover (the strategy draws only the kinds above)
        raise AssertionError(spec.kind)
    return fate, data


def mark_duplicates(
    messages: list[tuple[Fate, bytes]], stage: int, length: int
) -> list[tuple[Fate, bytes]]:
    """The seen-set rule: of identical right-length messages at ``stage``, the first keeps its
    fate and every other one is a duplicate there (wrong lengths are rejected before the seen-set
    is consulted, so identical wrong-length messages keep their fate)."""
    seen: set[bytes] = set()
    out = []
    for fate, data in messages:
        if len(data) == length:
            if data in seen:
                fate = Fate(stage=stage, reason=DUPLICATE)
            seen.add(data)
        out.append((fate, data))
    return out


def result_at(fate: Fate, stage: int) -> str | None:
    """What stage ``stage`` must return for a message of this fate (None: accepted)."""
    return fate.reason if fate.stage == stage else None


def assert_results_match(
    offered: list[tuple[Fate, bytes]], results: list[str | None], stage: int
) -> None:
    """Each message got its predicted result; identical byte strings are compared as multisets
    (which copy is the 'duplicate' depends on arrival order only)."""
    expected: dict[bytes, list[str]] = {}
    actual: dict[bytes, list[str]] = {}
    for (fate, data), result in zip(offered, results, strict=True):
        expected.setdefault(data, []).append(str(result_at(fate, stage)))
        actual.setdefault(data, []).append(str(result))
    for data, wanted in expected.items():
        assert sorted(actual[data]) == sorted(wanted), f"stage {stage}, {len(data)} bytes"


def offer_all(
    stage_round: HopRound | AnalyzerRound,
    messages: list[bytes],
    *,
    batched: bool,
    threaded: bool,
    as_view: bool,
) -> list[str | None]:
    """Offer ``messages`` in order: one ``offer`` each, or one ``offer_many`` (with a 2-thread
    mapper if ``threaded``); as memoryviews if ``as_view`` (bytes-like input is allowed)."""
    inputs: list[bytes | memoryview] = [memoryview(m) if as_view else m for m in messages]
    if batched:
        mapper = parallel_mapper(EXECUTOR, 2) if threaded else None
        return stage_round.offer_many(inputs, mapper=mapper)
    return [stage_round.offer(m) for m in inputs]


# --- every stage's peel, one hostile message at a time ----------------------------------------


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    n_hops=st.integers(1, H_MAX),
    stage_draw=STAGE,
    spec=HOSTILE,
    preloaded=st.lists(st.integers(0, K - 1), max_size=3),
)
def test_each_stage_rejects_each_hostile_message_once_with_its_reason(
    n_hops: int, stage_draw: int, spec: Hostile, preloaded: list[int]
) -> None:
    """Stage j (a hop or the analyzer) already holding some valid messages is offered one hostile
    message, then the same bytes again. The first offer returns the predicted result (its reason
    if stage j must catch it, None if a later stage must) and moves exactly one counter by one;
    the second is a duplicate (right length) or wrong-length again, counted once more; the
    valid messages are never disturbed (a hop releases them and the test's peel of an accepted
    hostile message; the analyzer's histogram holds only the valid values)."""
    stage = stage_draw % (n_hops + 1)
    length = message_length(stage, n_hops)
    valid = [
        (Fate(stage=n_hops, reason=None, value=v), onion_at(raw_record(value=v), stage, n_hops))
        for v in preloaded
    ]
    built = build(spec, stage, n_hops, valid)
    if built is None:
        return
    fate, data = mark_duplicates([*valid, built], stage, length)[-1]
    stage_round: HopRound | AnalyzerRound
    if stage < n_hops:
        stage_round = HopRound(
            hop_index=stage,
            n_hops=n_hops,
            round_id=ROUND,
            private_key=HOP_KEYS[stage].private,
            expected_size=len(valid) + 2,
            min_batch=1,
        )
    else:
        stage_round = AnalyzerRound(
            round_id=ROUND,
            k=K,
            n_hops=n_hops,
            private_key=ANALYZER.private,
            manifest_digest=MANIFEST_DIGEST,
        )
    assert all(stage_round.offer(message) is None for _, message in valid)
    before = stage_round.rejected
    first = stage_round.offer(data)
    assert first == result_at(fate, stage)
    moved = Counter(stage_round.rejected) - Counter(before)
    assert moved == (Counter({first: 1}) if first is not None else Counter())
    second = stage_round.offer(data)
    assert second == (DUPLICATE if len(data) == length else WRONG_LENGTH)
    assert sum(stage_round.rejected.values()) == sum(before.values()) + (first is not None) + 1
    if isinstance(stage_round, HopRound):
        accepted = [m for f, m in [*valid, (fate, data)] if result_at(f, stage) is None]
        key = HOP_KEYS[stage].private
        if not accepted:  # min_batch is 1: an empty hop releases nothing, and says so
            with pytest.raises(BatchTooSmall):
                stage_round.close()
            return
        output = stage_round.close()
        assert sorted(output.messages) == sorted(SealedBox(key).decrypt(m) for m in accepted)
    else:
        counted = list(preloaded) + (
            [fate.value] if first is None and fate.value is not None else []
        )
        assert stage_round.n_received == len(counted)
        assert stage_round.histogram().tolist() == np.bincount(counted, minlength=K).tolist()


# --- whole rounds ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StageLog:
    """What one stage was offered and what it did with it (the test's own bookkeeping)."""

    offered: int
    accepted: int
    rejected: dict[str, int]


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(
    n_hops=st.integers(1, H_MAX),
    values=st.lists(st.integers(0, K - 1), max_size=10),
    hostile=st.lists(HOSTILE, min_size=2, max_size=24),
    min_batch=st.integers(1, 3),
    order=st.randoms(use_true_random=False),
    hop_seed=st.integers(0, 2**32),
    batched=st.booleans(),
    threaded=st.booleans(),
    as_view=st.booleans(),
)
def test_whole_round_counts_exactly_the_valid_distinct_reports(
    n_hops: int,
    values: list[int],
    hostile: list[Hostile],
    min_batch: int,
    order: random.Random,
    hop_seed: int,
    batched: bool,
    threaded: bool,
    as_view: bool,
) -> None:
    """Valid client reports and hostile messages, injected at their entry stages in a random
    order, run through all H hops and the analyzer. Checked: no exception; every stage returns
    each message's predicted result and counts it once under its reason at the stage that must
    catch it; accepted + rejected = offered at every stage, and stage j + 1 is offered exactly
    what stage j forwarded plus what was injected there; a hop releases exactly the peels of
    what it accepted, or nothing (BatchTooSmall) if that is fewer than min_batch; each message
    ends exactly once; the analyzer's histogram is the histogram of the valid distinct reports."""
    messages: list[tuple[Fate, bytes]] = [
        (Fate(stage=n_hops, reason=None, value=v), onion_at(raw_record(value=v), 0, n_hops))
        for v in values
    ]
    introduced = len(messages)
    forged: list[int] = []  # well-formed reports injected by the adversary (hops cannot tell)
    logs: list[StageLog] = []
    forwarded = 0
    for stage in range(n_hops + 1):
        length = message_length(stage, n_hops)
        injected = 0
        for spec in hostile:
            if spec.entry % (n_hops + 1) == stage:
                built = build(spec, stage, n_hops, messages)
                if built is not None:
                    messages.append(built)
                    injected += 1
                    if built[0].value is not None:
                        forged.append(built[0].value)
        introduced += injected
        messages = mark_duplicates(messages, stage, length)
        order.shuffle(messages)
        assert len(messages) == forwarded + injected + (len(values) if stage == 0 else 0)
        stage_round: HopRound | AnalyzerRound
        if stage < n_hops:
            stage_round = HopRound(
                hop_index=stage,
                n_hops=n_hops,
                round_id=ROUND,
                private_key=HOP_KEYS[stage].private,
                expected_size=max(min_batch, len(messages)),
                min_batch=min_batch,
                rng=SeededRandom(hop_seed + stage),
            )
            reasons = HOP_REJECTION_REASONS
        else:
            stage_round = AnalyzerRound(
                round_id=ROUND,
                k=K,
                n_hops=n_hops,
                private_key=ANALYZER.private,
                manifest_digest=MANIFEST_DIGEST,
            )
            reasons = REJECTION_REASONS
        results = offer_all(
            stage_round,
            [data for _, data in messages],
            batched=batched,
            threaded=threaded,
            as_view=as_view,
        )
        assert_results_match(messages, results, stage)
        wanted = Counter(f.reason for f, _ in messages if f.stage == stage and f.reason)
        rejected = stage_round.rejected
        assert rejected == {reason: wanted[reason] for reason in reasons}
        survivors = [(f, data) for f, data in messages if result_at(f, stage) is None]
        accepted = (
            stage_round.accepted if isinstance(stage_round, HopRound) else stage_round.n_received
        )
        assert accepted == len(survivors)
        assert accepted + sum(rejected.values()) == len(messages)
        logs.append(StageLog(offered=len(messages), accepted=accepted, rejected=rejected))
        for reason, count in rejected.items():
            if count:  # coverage, shown by pytest --hypothesis-show-statistics
                event(f"{'analyzer' if stage == n_hops else 'hop'} rejects {reason}")
        if isinstance(stage_round, HopRound):
            if len(survivors) < min_batch:
                with pytest.raises(BatchTooSmall):
                    stage_round.close()
                event("a hop below min_batch released nothing")
                return  # nothing released: the round ends here, the survivors are dropped
            output = stage_round.close()
            key = stage_private_key(stage, n_hops)
            messages = [(f, SealedBox(key).decrypt(data)) for f, data in survivors]
            assert sorted(output.messages) == sorted(data for _, data in messages)
            assert output.accepted == output.forwarded == len(survivors)
            forwarded = output.forwarded
        else:
            assert isinstance(stage_round, AnalyzerRound)
            counted = [f.value for f, _ in survivors if f.value is not None]
            assert len(counted) == len(survivors)
            histogram = stage_round.histogram()
            assert histogram.tolist() == np.bincount(counted, minlength=K).tolist()
            # Every message ends exactly once: rejected at one stage or counted.
            ended = sum(sum(log.rejected.values()) for log in logs) + stage_round.n_received
            assert ended == introduced
            event(f"the analyzer counted {'no' if not counted else 'some'} reports")
            # The valid distinct reports, each counted once (copies never count twice): the
            # clients' and the forged ones, from the recipes, not from the tracked fates.
            assert Counter(counted) == Counter(values) + Counter(forged)


@pytest.mark.parametrize("n_hops", [1, 2, 3])
def test_recorded_traffic_of_round_r_minus_1_replayed_at_every_stage(n_hops: int) -> None:
    """Round r - 1 runs cleanly with 6 reports while the adversary records every stage's input.
    In round r it replays all of it, each message at the stage it was recorded at, among 5 fresh
    reports. Known answer: a hop's seen-set is per round and hops cannot read round ids, so hop 0
    accepts the 6 replays; at each stage j >= 1 the replays recorded there are exact copies of
    what hop j - 1 now forwards (opening a sealed box is deterministic), so exactly 6 duplicates
    at every stage j >= 1 and none at hop 0; the analyzer rejects the 6 surviving replays as
    wrong-round and counts exactly the 5 fresh reports."""
    previous_values = [0, 1, 2, 3, 4, 0]
    fresh_values = [4, 4, 1, 0, 2]
    recorded: list[list[bytes]] = []
    inputs = [onion_at(raw_record(round_id=ROUND - 1, value=v), 0, n_hops) for v in previous_values]
    for hop_index in range(n_hops):
        recorded.append(inputs)
        hop = HopRound(
            hop_index=hop_index,
            n_hops=n_hops,
            round_id=ROUND - 1,
            private_key=HOP_KEYS[hop_index].private,
            expected_size=len(inputs),
            min_batch=len(inputs),
        )
        assert [hop.offer(m) for m in inputs] == [None] * len(inputs)
        inputs = hop.close().messages
    recorded.append(inputs)
    previous = AnalyzerRound(
        round_id=ROUND - 1,
        k=K,
        n_hops=n_hops,
        private_key=ANALYZER.private,
        manifest_digest=MANIFEST_DIGEST,
    )
    assert previous.offer_many(inputs) == [None] * len(inputs)
    assert previous.histogram().tolist() == np.bincount(previous_values, minlength=K).tolist()

    shuffle = np.random.default_rng(n_hops).permutation
    messages = [onion_at(raw_record(value=v), 0, n_hops) for v in fresh_values] + recorded[0]
    for hop_index in range(n_hops):
        if hop_index:
            messages = messages + recorded[hop_index]
        messages = [messages[int(i)] for i in shuffle(len(messages))]
        hop = HopRound(
            hop_index=hop_index,
            n_hops=n_hops,
            round_id=ROUND,
            private_key=HOP_KEYS[hop_index].private,
            expected_size=len(messages),
            min_batch=1,
        )
        hop.offer_many(messages)
        assert hop.rejected == {
            "wrong-length": 0,
            "duplicate": 6 if hop_index else 0,
            "batch-full": 0,
            "decryption-failed": 0,
            "unknown-client": 0,  # no client authentication here
            "bad-authenticator": 0,
            "client-already-reported": 0,
        }
        messages = hop.close().messages
        assert len(messages) == 11
    analyzer = AnalyzerRound(
        round_id=ROUND,
        k=K,
        n_hops=n_hops,
        private_key=ANALYZER.private,
        manifest_digest=MANIFEST_DIGEST,
    )
    analyzer.offer_many(messages + recorded[n_hops])
    assert analyzer.rejected == {reason: 0 for reason in REJECTION_REASONS} | {
        "duplicate": 6,
        "wrong-round": 6,
    }
    assert analyzer.n_received == 5
    assert analyzer.histogram().tolist() == np.bincount(fresh_values, minlength=K).tolist()
