"""The round manifest: validation, JSON round trip, digest and signature (protocol/manifest.py).

The property tests mutate one field (or one byte of the file) at a time and require the
signature check to refuse the result, unless the mutation left the manifest equal to the
signed one (JSON whitespace): a signed manifest cannot be changed without the coordinator key.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.signing import SigningKey

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.manifest import (
    DIGEST_SIZE,
    Manifest,
    ManifestError,
    SignedManifest,
    StageKeys,
    load_manifest,
    sign_manifest,
)
from tests.manifests import make_manifest, manifest_keys, signed_manifest

KEYS = manifest_keys(3)
SIGNED = signed_manifest(KEYS)
TRUSTED = bytes(KEYS.coordinator.verify_key)


def test_json_round_trip_gives_the_same_manifest_bytes_and_digest() -> None:
    document = json.loads(SIGNED.dumps())
    again = SignedManifest.from_json(document)
    assert again == SIGNED
    assert again.manifest.canonical_bytes() == SIGNED.manifest.canonical_bytes()
    assert again.manifest.digest == SIGNED.manifest.digest
    assert len(SIGNED.manifest.digest) == DIGEST_SIZE


@given(
    eps0=st.floats(min_value=1e-6, max_value=50, allow_nan=False),
    delta=st.floats(min_value=1e-300, max_value=0.5, exclude_min=False),
    deadline=st.floats(min_value=1e-3, max_value=1e6),
    clients=st.lists(st.integers(1, 10**6), min_size=1, max_size=5).map(tuple),
    rounds=st.sets(st.integers(0, 2**64 - 1), min_size=1, max_size=5).map(
        lambda ids: tuple(sorted(ids))
    ),
)
@settings(max_examples=60, deadline=None)
def test_round_trip_of_any_valid_manifest(
    eps0: float, delta: float, deadline: float, clients: tuple[int, ...], rounds: tuple[int, ...]
) -> None:
    manifest = make_manifest(
        KEYS,
        eps0=eps0,
        delta=delta,
        deadline=deadline,
        clients=clients,
        rounds=rounds,
        expected=sum(clients),
        min_batch=1,
    )
    again = Manifest.from_json(json.loads(json.dumps(manifest.to_json())))
    assert again == manifest
    assert again.digest == manifest.digest


def test_integers_for_real_fields_sign_what_a_reader_reads_back() -> None:
    """eps0=4 (an int, as Python callers write it) signs the bytes of 4.0: read back from the
    file, the manifest still verifies (it did not: simulate's analyzer refused it)."""
    signed = sign_manifest(make_manifest(KEYS, eps0=4, deadline=60, delta=1e-6), KEYS.coordinator)
    again = SignedManifest.from_json(json.loads(signed.dumps()))
    assert again.verified(TRUSTED) == signed.manifest


def test_signature_verifies_with_the_trusted_key_only() -> None:
    assert SIGNED.verified(TRUSTED) == SIGNED.manifest
    other = bytes(SigningKey.generate().verify_key)
    with pytest.raises(ManifestError, match="signed by the trusted coordinator key"):
        SIGNED.verified(other)


def test_a_manifest_signed_by_another_key_naming_it_is_refused() -> None:
    impostor = SigningKey.generate()
    forged = sign_manifest(
        replace(SIGNED.manifest, coordinator=bytes(impostor.verify_key)), impostor
    )
    with pytest.raises(ManifestError, match="signed by the trusted coordinator key"):
        forged.verified(TRUSTED)


# One valid replacement per field (with what must change with it to stay valid): each must
# change the digest and fail the signature made for the original.
_MUTATIONS: dict[str, dict[str, Any]] = {
    "prefix": {"prefix": "other-prefix"},
    "rounds": {"rounds": (2,)},
    "k": {"k": 16, "labels": tuple(str(v) for v in range(16))},
    "labels": {"labels": tuple(f"v{i}" for i in range(15))},
    "eps0": {"eps0": 1.0},
    "hops": {"hops": tuple(reversed(SIGNED.manifest.hops))},
    "analyzer": {
        "analyzer": SIGNED.manifest.hops[0],
        "hops": (SIGNED.manifest.analyzer, *SIGNED.manifest.hops[1:]),
    },
    "clients": {"clients": (1000, 1001)},
    "expected": {"clients": (1001, 1001), "expected": 2002},
    "min_batch": {"min_batch": 999},
    "deadline": {"deadline": 61.0},
    "delta": {"delta": 1e-7},
    "colluders": {"colluders": 1},
    "coordinator": {"coordinator": bytes(SigningKey.generate().verify_key)},
    "client_auth": {"client_auth": False},
}


def test_every_field_has_a_mutation() -> None:
    assert set(_MUTATIONS) | {"protocol_version"} == set(SIGNED.manifest.to_json())


@pytest.mark.parametrize("name", sorted(_MUTATIONS))
def test_any_single_field_mutation_is_refused(name: str) -> None:
    mutated = replace(SIGNED.manifest, **_MUTATIONS[name])
    assert mutated.digest != SIGNED.manifest.digest
    forged = SignedManifest(manifest=mutated, signature=SIGNED.signature)
    with pytest.raises(ManifestError, match="coordinator key"):
        forged.verified(TRUSTED if name != "coordinator" else mutated.coordinator)


@given(data=st.data())
@settings(max_examples=150, deadline=None)
def test_any_single_byte_change_of_the_file_is_refused_or_invisible(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    raw = bytearray(SIGNED.dumps().encode())
    position = data.draw(st.integers(0, len(raw) - 1))
    value = data.draw(st.integers(0, 255).filter(lambda b: b != raw[position]))
    raw[position] = value
    path = tmp_path_factory.mktemp("m") / "manifest.json"
    path.write_bytes(bytes(raw))
    try:
        loaded = load_manifest(path, TRUSTED)
    except ManifestError:
        return
    assert loaded == SIGNED.manifest  # only JSON whitespace changed


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"eps0": -1.0}, "manifest field eps0 must be a finite number > 0, got -1.0"),
        ({"k": 1, "labels": ("a",)}, "manifest field k must be in"),
        ({"labels": ("a",) * 15}, "manifest field labels must be distinct"),
        (
            {"expected": 2000},
            r"manifest field expected must equal the enrolled clients, "
            r"sum\(clients\) = 2001, got 2000",
        ),
        ({"min_batch": 3000}, "manifest field min_batch must be in"),
        ({"colluders": 2001}, "manifest field colluders must be in"),
        ({"delta": 1.0}, r"manifest field delta must be in \(0, 1\), got 1.0"),
        ({"rounds": (2, 1)}, "manifest field rounds must be distinct and increasing"),
        ({"rounds": ()}, "manifest field rounds must hold 1 to"),
        ({"prefix": "a/+"}, "manifest field prefix"),
        ({"clients": (0, 5)}, "manifest field clients must be"),
        ({"protocol_version": 1}, "manifest field protocol_version must be 2"),
        ({"deadline": float("inf")}, "manifest field deadline must be a finite number"),
    ],
)
def test_each_rule_is_named_when_built(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        make_manifest(KEYS, **overrides)


def test_stage_keys_must_be_distinct() -> None:
    hop = SIGNED.manifest.hops[0]
    with pytest.raises(ManifestError, match=r"hops\[1\]\.box must differ"):
        make_manifest(KEYS, hops=(hop, hop, SIGNED.manifest.hops[2]))


def test_a_low_order_box_key_is_refused() -> None:
    with pytest.raises(ManifestError, match="valid X25519 point"):
        StageKeys(box=bytes(32), sign=bytes(SIGNED.manifest.analyzer.sign))


def test_manifest_error_is_bad_input() -> None:
    assert issubclass(ManifestError, InvalidParameterError)


def test_unknown_and_missing_keys_are_named(tmp_path: Path) -> None:
    document = json.loads(SIGNED.dumps())
    document["manifest"]["surprise"] = 1
    path = tmp_path / "m.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ManifestError, match=r"m\.json: manifest field manifest has unknown key"):
        load_manifest(path, TRUSTED)
    del document["manifest"]["surprise"]
    del document["manifest"]["eps0"]
    path.write_text(json.dumps(document))
    with pytest.raises(ManifestError, match="is missing key"):
        load_manifest(path, TRUSTED)


def test_guarantee_n_subtracts_the_colluders() -> None:
    assert make_manifest(KEYS, colluders=7).guarantee_n == 2001 - 7


def test_hop_workers_is_written_only_when_above_one_and_read_back() -> None:
    plain = make_manifest()
    assert plain.hop_workers == 1 and "hop_workers" not in plain.to_json()
    # A manifest without the field is the manifest of W = 1: the same bytes, the same digest.
    assert Manifest.from_json(plain.to_json()).digest == plain.digest
    clients = (3, 4, 5)
    workers = make_manifest(clients=clients, expected=sum(clients), min_batch=1, hop_workers=2)
    document = workers.to_json()
    assert document["hop_workers"] == 2
    again = Manifest.from_json(json.loads(json.dumps(document)))
    assert again.hop_workers == 2 and again.digest == workers.digest != plain.digest
    # hop 0's peeler P takes the client processes j with j mod W = P
    assert [workers.peeler_share(p) for p in range(2)] == [3 + 5, 4]


def test_hop_workers_above_the_client_processes_is_refused() -> None:
    clients = (3, 4)
    with pytest.raises(ManifestError, match="hop_workers must be at most the 2 client processes"):
        make_manifest(clients=clients, expected=sum(clients), min_batch=1, hop_workers=3)
