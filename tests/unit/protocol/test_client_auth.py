"""One report per enrolled client per round: the authenticator envelope, hop 0's checks, the key
files, and whole rounds over the in-memory broker.

Known answers are computed with an independent HMAC-SHA256 (RFC 2104 written out over hashlib,
checked against RFC 4231 test case 2), not with the ``hmac`` module the code uses.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shuffledp.analyzer.service import AnalyzerSettings, run_analyzer
from shuffledp.clients.client import make_client_messages
from shuffledp.clients.service import ClientSettings, run_clients
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol import message_length, peel
from shuffledp.protocol.client_auth import (
    ENVELOPE_SIZE,
    ClientCredential,
    ClientRoster,
    ClientVerifier,
    ProcessCredentials,
    client_id_of,
    client_key,
    process_key,
    seal_envelope,
)
from shuffledp.protocol.errors import BadAuthenticator, UnknownClient
from shuffledp.protocol.seen_set import DEFAULT_IN_MEMORY
from shuffledp.protocol.topics import ingress_topic
from shuffledp.protocol.transport import MemoryBroker
from shuffledp.randomness import SeededRandom
from shuffledp.security.access import (
    AccessError,
    access_directory,
    init_access,
    load_access_settings,
    load_client_verifier,
    load_process_credentials,
)
from shuffledp.shuffler.hop import HopRound
from shuffledp.shuffler.service import HopSettings, run_hop
from tests.binding import MANIFEST_DIGEST, analyzer_binding, hop_binding
from tests.unit.test_services_memory import (
    ANALYZER,
    EPS0,
    HOP_PUBLIC,
    HOPS,
    LONG,
    PREFIX,
    H,
    K,
    expected_histogram,
    nonzero,
    publisher,
    start_in_order,
    values_for,
)

MASTER = bytes(range(32))
ROUND = 7


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    """RFC 2104 over hashlib: H((K ^ opad) | H((K ^ ipad) | m)), K zero-padded to 64 bytes."""
    block = (
        key.ljust(64, b"\0") if len(key) <= 64 else hashlib.sha256(key).digest().ljust(64, b"\0")
    )
    inner = hashlib.sha256(bytes(b ^ 0x36 for b in block) + message).digest()
    return hashlib.sha256(bytes(b ^ 0x5C for b in block) + inner).digest()


def test_the_independent_hmac_matches_rfc_4231_test_case_2() -> None:
    # RFC 4231 section 4.3: key "Jefe", data "what do ya want for nothing?".
    expected = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    assert hmac_sha256(b"Jefe", b"what do ya want for nothing?").hex() == expected


def test_keys_and_envelope_follow_the_documented_derivation() -> None:
    process, index = 3, 12345
    client_id = client_id_of(process, index)
    assert client_id == 3 * 2**32 + 12345
    p_key = hmac_sha256(MASTER, b"shuffledp/client-process-key/v1\0" + struct.pack(">I", process))
    assert process_key(MASTER, process) == p_key
    c_key = hmac_sha256(p_key, b"shuffledp/client-key/v1\0" + struct.pack(">Q", client_id))
    assert client_key(p_key, client_id) == c_key
    onion = bytes(range(200))
    credential = ClientCredential.derive(p_key, process, index)
    envelope = seal_envelope(credential, ROUND, onion)
    tag = hmac_sha256(
        c_key,
        b"shuffledp/report-tag/v1\0" + struct.pack(">QQ", ROUND, client_id) + onion,
    )
    assert envelope == struct.pack(">Q", client_id) + tag + onion
    assert len(envelope) == ENVELOPE_SIZE + len(onion) == 40 + 200
    assert "key" not in repr(credential).replace("ClientCredential", "")


ROSTER = ClientRoster(client_processes=2, clients_per_process=100)


def verifier(round_id: int = ROUND) -> ClientVerifier:
    return ClientVerifier(master_key=MASTER, roster=ROSTER, round_id=round_id)


def credential(process: int, index: int) -> ClientCredential:
    return ProcessCredentials(process=process, key=process_key(MASTER, process)).credential(index)


def test_an_authentic_envelope_opens_to_its_client_and_onion() -> None:
    onion = os.urandom(100)
    for process, index in [(0, 0), (1, 99), (0, 57)]:
        sealed = seal_envelope(credential(process, index), ROUND, onion)
        assert verifier().open(sealed) == (client_id_of(process, index), onion)


def test_every_forgery_is_refused_with_its_reason() -> None:
    onion = os.urandom(100)
    good = seal_envelope(credential(1, 5), ROUND, onion)
    other_client = seal_envelope(credential(1, 6), ROUND, onion)
    cases: list[tuple[bytes, type[Exception]]] = [
        (seal_envelope(credential(1, 5), ROUND + 1, onion), BadAuthenticator),  # another round
        (good[:8] + other_client[8:], BadAuthenticator),  # another client's tag under this id
        (good[:-1] + bytes([good[-1] ^ 1]), BadAuthenticator),  # onion changed after tagging
        (good[:8] + bytes(32) + onion, BadAuthenticator),  # no tag
        (good[:10], BadAuthenticator),  # shorter than the envelope
        (seal_envelope(credential(2, 0), ROUND, onion), UnknownClient),  # process 2 of 2
        (seal_envelope(credential(0, 100), ROUND, onion), UnknownClient),  # index 100 of 100
        # A client key derived from another master: the id is enrolled, the tag is wrong.
        (
            seal_envelope(ClientCredential.derive(process_key(bytes(32), 0), 0, 1), ROUND, onion),
            BadAuthenticator,
        ),
    ]
    for message, error in cases:
        with pytest.raises(error):
            verifier().open(message)


@settings(max_examples=300, deadline=None)
@given(position=st.integers(0, ENVELOPE_SIZE + 63), bit=st.integers(0, 7))
def test_any_single_bit_flip_is_refused(position: int, bit: int) -> None:
    good = seal_envelope(credential(0, 3), ROUND, bytes(64))
    flipped = bytearray(good)
    flipped[position] ^= 1 << bit
    with pytest.raises((BadAuthenticator, UnknownClient)):
        verifier().open(bytes(flipped))


@pytest.mark.parametrize(
    ("kwargs", "rule"),
    [
        ({"client_processes": 0, "clients_per_process": 1}, "client_processes"),
        ({"client_processes": 1, "clients_per_process": 0}, "clients_per_process"),
        ({"client_processes": 1, "clients_per_process": 2**32 + 1}, "clients_per_process"),
    ],
)
def test_a_roster_outside_its_ranges_is_refused(kwargs: dict[str, Any], rule: str) -> None:
    with pytest.raises(InvalidParameterError, match=rule):
        ClientRoster(**kwargs)


def test_keys_of_the_wrong_size_are_refused() -> None:
    with pytest.raises(InvalidParameterError, match="master key must be 32 bytes, got 31"):
        ClientVerifier(master_key=bytes(31), roster=ROSTER, round_id=ROUND)
    with pytest.raises(InvalidParameterError, match="client key must be 32 bytes"):
        ClientCredential(client_id=1, key=b"short")


# --- hop 0 ------------------------------------------------------------------------------------


def hop0(
    expected_size: int, *, round_id: int = ROUND, seen_in_memory: int = DEFAULT_IN_MEMORY
) -> HopRound:
    return HopRound(
        hop_index=0,
        n_hops=H,
        round_id=round_id,
        private_key=HOPS[0].private,
        expected_size=expected_size,
        min_batch=1,
        rng=SeededRandom(1),
        verifier=verifier(round_id),
        seen_in_memory=seen_in_memory,
    )


def seal(
    values: Any,
    *,
    round_id: int = ROUND,
    credentials: list[ClientCredential] | None = None,
    seed: int | None = None,
) -> list[bytes]:
    """The clients' messages for ``values`` (k-RR seeded if ``seed``), in their envelopes if
    ``credentials`` are given."""
    return make_client_messages(
        values,
        k=K,
        eps0=EPS0,
        round_id=round_id,
        hop_public_keys=HOP_PUBLIC,
        analyzer_public_key=ANALYZER.public,
        rng=None if seed is None else SeededRandom(seed),
        credentials=credentials,
        manifest_digest=MANIFEST_DIGEST,
    )


def reports(indices: list[tuple[int, int]], *, round_id: int = ROUND, seed: int = 0) -> list[bytes]:
    """One authentic report per (process, index), values 0, 1, 2, ..."""
    credentials = [credential(p, i) for p, i in indices]
    return seal(np.arange(len(indices)) % K, round_id=round_id, credentials=credentials, seed=seed)


def test_hop_0_takes_one_report_per_client_and_strips_the_envelope() -> None:
    first = reports([(0, 0), (0, 1), (1, 0)])
    second = reports([(0, 1)], seed=1)  # client (0, 1) again, with a fresh onion
    onion_only = seal([1])
    hop = hop0(4)
    assert hop.input_length == message_length(0, H) + ENVELOPE_SIZE
    outcomes = [hop.offer(m) for m in [*first, *second, *onion_only]]
    assert outcomes == [None, None, None, "client-already-reported", "wrong-length"]
    output = hop.close()
    assert output.accepted == 3
    assert {len(m) for m in output.messages} == {message_length(1, H)}
    # What hop 0 forwards is exactly the clients' onions peeled once: nothing of the envelope.
    length = message_length(0, H)
    expected = sorted(
        peel(m[ENVELOPE_SIZE:], HOPS[0].private, expected_length=length) for m in first
    )
    assert sorted(output.messages) == expected


def test_a_second_report_is_refused_after_the_reported_set_spills_to_disk() -> None:
    """seen_in_memory=1: every client id (and every digest) is on disk before the next offer, so
    a client's second report (a fresh onion: a new digest) is refused by the disk's answer."""
    first = reports([(0, 0), (0, 1), (1, 0), (1, 1)])
    again = reports([(0, 1), (1, 0)], seed=1)
    hop = hop0(10, seen_in_memory=1)
    outcomes = [hop.offer(m) for m in [*first, *again, first[0]]]
    assert outcomes == [None] * 4 + ["client-already-reported"] * 2 + ["duplicate"]
    assert hop.close().accepted == 4


def test_a_forgery_does_not_use_up_the_clients_report() -> None:
    (genuine,) = reports([(1, 42)])
    forged = genuine[:8] + bytes(32) + genuine[40:]
    hop = hop0(2)
    assert hop.offer(forged) == "bad-authenticator"
    assert hop.offer(genuine) is None
    assert hop.rejected["bad-authenticator"] == 1
    assert hop.rejected["client-already-reported"] == 0


def test_a_report_tagged_for_another_round_is_refused() -> None:
    (old,) = reports([(0, 9)], round_id=ROUND - 1)
    hop = hop0(1)
    assert hop.offer(old) == "bad-authenticator"


@settings(max_examples=40, deadline=None)
@given(
    picks=st.lists(st.integers(0, 11), min_size=1, max_size=30),
    expected_size=st.integers(1, 8),
)
def test_offer_many_equals_offer_one_at_a_time_with_authentication(
    picks: list[int], expected_size: int
) -> None:
    pool = reports([(i % 2, i // 2) for i in range(6)])
    pool += reports([(i % 2, i // 2) for i in range(3)], seed=9)  # second reports of 3 clients
    pool += [m[:8] + bytes(32) + m[40:] for m in pool[:3]]  # forgeries
    stream = [pool[p] for p in picks]
    one, many = hop0(expected_size), hop0(expected_size)
    assert [one.offer(m) for m in stream] == many.offer_many(stream)
    assert one.rejected == many.rejected and one.accepted == many.accepted
    assert one.accepted + sum(one.rejected.values()) == len(stream)


def test_a_verifier_is_for_hop_0_and_its_round_only() -> None:
    with pytest.raises(InvalidParameterError, match="hop 0 only"):
        HopRound(
            hop_index=1,
            n_hops=H,
            round_id=ROUND,
            private_key=HOPS[1].private,
            expected_size=2,
            min_batch=1,
            verifier=verifier(),
        )
    with pytest.raises(InvalidParameterError, match=f"round {ROUND + 1}"):
        HopRound(
            hop_index=0,
            n_hops=H,
            round_id=ROUND + 1,
            private_key=HOPS[0].private,
            expected_size=2,
            min_batch=1,
            verifier=verifier(),
        )


# --- key files --------------------------------------------------------------------------------


def test_init_access_writes_the_client_keys_and_the_enrolment(tmp_path: Path) -> None:
    init_access(tmp_path, hops=2, client_processes=3, prefix="p", clients_per_process=50)
    root = access_directory(tmp_path)
    master_file = root / "client-master.key"
    assert stat.S_IMODE(master_file.stat().st_mode) == 0o600
    master = bytes.fromhex(master_file.read_text().strip())
    assert len(master) == 32
    for process in range(3):
        path = root / f"clients-{process}.clientkey"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        loaded = load_process_credentials(tmp_path, process)
        assert loaded.key == process_key(master, process) == bytes.fromhex(path.read_text())
    settings_ = load_access_settings(tmp_path)
    assert settings_.roster() == ClientRoster(client_processes=3, clients_per_process=50)
    assert settings_.roster(10**6) == settings_.roster()  # a fixed enrolment ignores n
    assert (settings_.prefix, settings_.n_hops) == ("p", 2)
    check = load_client_verifier(tmp_path, ROUND)
    sealed = seal_envelope(load_process_credentials(tmp_path, 2).credential(49), ROUND, b"x" * 9)
    assert check.open(sealed) == (client_id_of(2, 49), b"x" * 9)
    with pytest.raises(UnknownClient):
        check.open(seal_envelope(load_process_credentials(tmp_path, 2).credential(50), ROUND, b""))
    # Two directories never share a master key (OS CSPRNG).
    init_access(tmp_path / "other", hops=2, client_processes=3, prefix="p")
    other = (access_directory(tmp_path / "other") / "client-master.key").read_text()
    assert other != master_file.read_text()


def test_enrolment_defaults_to_each_process_share_of_the_round(tmp_path: Path) -> None:
    """Without --clients-per-process, hop 0 enrols ceil(expected / processes) clients per
    process: exactly what each process hosts when the round is split evenly, so one process
    key can never fill a round alone (it used to enrol 1,000,000 per process)."""
    init_access(tmp_path, hops=1, client_processes=2, prefix="p")
    document = json.loads((access_directory(tmp_path) / "access.json").read_text())
    assert document["clients_per_process"] is None
    settings_ = load_access_settings(tmp_path)
    assert settings_.roster(10_000) == ClientRoster(client_processes=2, clients_per_process=5_000)
    assert settings_.roster(7).clients_per_process == 4  # 4 + 3: np.array_split's split
    with pytest.raises(ValueError, match="even-share enrolment needs the round's size"):
        settings_.roster()
    check = load_client_verifier(tmp_path, ROUND, expected=10_000)
    process = load_process_credentials(tmp_path, 0)
    last = seal_envelope(process.credential(4_999), ROUND, b"r")
    assert check.open(last) == (client_id_of(0, 4_999), b"r")
    # The 5,001st identity of one process key is refused: it cannot take another's share.
    with pytest.raises(UnknownClient, match="2 processes of 5000 clients"):
        check.open(seal_envelope(process.credential(5_000), ROUND, b"r"))


def test_client_key_files_are_checked(tmp_path: Path) -> None:
    init_access(tmp_path, hops=1, client_processes=1, prefix="p")
    root = access_directory(tmp_path)
    os.chmod(root / "client-master.key", 0o640)
    with pytest.raises(AccessError, match="client master key file must have mode 0600"):
        load_client_verifier(tmp_path, 1)
    with pytest.raises(
        AccessError, match=r"clients-1\.clientkey: client process key file must exist"
    ):
        load_process_credentials(tmp_path, 1)
    (root / "clients-0.clientkey").write_text("not hex\n")
    with pytest.raises(AccessError, match="must hold exactly 64 hex characters"):
        load_process_credentials(tmp_path, 0)


# --- whole rounds over the in-memory broker ---------------------------------------------------


def authenticated_pipeline(broker: MemoryBroker, *, round_id: int, n: int) -> dict[str, Any]:
    stages: dict[str, Any] = {}
    for index in range(H):
        settings = HopSettings(
            prefix=PREFIX,
            round_id=round_id,
            hop_index=index,
            n_hops=H,
            expected_size=n,
            min_batch=1,
            deadline=LONG,
            ready_timeout=LONG,
            **hop_binding(index),
        )
        stages[f"hop-{index}"] = run_hop(
            broker.connect(),
            settings,
            HOPS[index].private,
            rng=SeededRandom(100 + index),
            verifier=verifier(round_id) if index == 0 else None,
        )
    analyzer = AnalyzerSettings(
        prefix=PREFIX,
        round_id=round_id,
        k=K,
        eps0=EPS0,
        n_hops=H,
        n_expected=n,
        deadline=LONG,
        **analyzer_binding(H),
    )
    stages["analyzer"] = run_analyzer(broker.connect(), analyzer, ANALYZER.private)
    return stages


@pytest.mark.asyncio
async def test_an_authenticated_round_of_run_clients_counts_every_client_once() -> None:
    n, round_id, seed = 100, 11, 5
    values = values_for(n)
    broker = MemoryBroker()
    stages = authenticated_pipeline(broker, round_id=round_id, n=n)
    settings = ClientSettings(
        prefix=PREFIX, round_id=round_id, k=K, eps0=EPS0, manifest_digest=MANIFEST_DIGEST
    )
    stages["clients"] = run_clients(
        broker.connect(),
        settings,
        values,
        hop_public_keys=HOP_PUBLIC,
        analyzer_public_key=ANALYZER.public,
        rng=SeededRandom(seed),
        credentials=ProcessCredentials(process=1, key=process_key(MASTER, 1)),
    )
    outcome = await start_in_order(stages, list(stages))
    report = outcome.report
    assert outcome.results["clients"]["authenticated"] is True
    assert report["n_received"] == n
    assert nonzero(report["rejected"]) == {}
    assert report["stages"]["hop-0"]["clients_authenticated"] is True
    assert report["histogram"] == expected_histogram(values, seed)


@pytest.mark.asyncio
async def test_a_client_sending_twice_is_counted_once_and_forgeries_by_reason() -> None:
    n, round_id, seed = 60, 12, 8
    values = values_for(n)
    clients = [(i % 2, i // 2) for i in range(n)]
    genuine = seal(
        values, round_id=round_id, credentials=[credential(p, i) for p, i in clients], seed=seed
    )
    again = reports(clients[:10], round_id=round_id, seed=99)  # 10 clients report a second time
    forged = [m[:8] + bytes(32) + m[40:] for m in genuine[10:15]]
    stranger = reports([(1, 100)] * 3, round_id=round_id)  # index 100 of 100: not enrolled
    unauthenticated = seal(values[:4], round_id=round_id)
    gen = np.random.default_rng(3)
    early = genuine[:-1] + forged + stranger + unauthenticated
    # The second reports come after the clients' first ones (so which of the two counts is
    # known), and the last genuine report last (hop 0 stops reading once its batch is full).
    stream = [early[int(i)] for i in gen.permutation(len(early))] + again + [genuine[-1]]
    broker = MemoryBroker()
    stages = authenticated_pipeline(broker, round_id=round_id, n=n)
    stages["junk"] = publisher(broker, round_id, ingress_topic(PREFIX, round_id, 0), stream)
    outcome = await start_in_order(stages, list(stages))
    report = outcome.report
    expected = {
        "client-already-reported": 10,
        "bad-authenticator": 5,
        "unknown-client": 3,
        "wrong-length": 4,
    }
    assert nonzero(report["stages"]["hop-0"]["rejected"]) == expected
    assert report["stages"]["hop-0"]["accepted"] == n
    assert report["n_received"] == n
    assert report["histogram"] == expected_histogram(values, seed)


def test_exact_roster_enrols_each_process_exactly_its_count() -> None:
    """A manifest's enrolment (2,001 = 1,001 + 1,000): no rounding slack, so process 1 cannot
    use a 1,001st identity (it could under the even share ceil(2001 / 2) = 1,001)."""
    roster = ClientRoster.exact((1001, 1000))
    assert roster.enrolled(client_id_of(0, 1000))
    assert not roster.enrolled(client_id_of(1, 1000))
    assert roster.enrolled(client_id_of(1, 999))
    assert not roster.enrolled(client_id_of(2, 0))
    assert [roster.size(p) for p in (0, 1, 2)] == [1001, 1000, 0]
    even = ClientRoster(client_processes=2, clients_per_process=1001)
    assert even.enrolled(client_id_of(1, 1000))  # the slack the exact roster removes
