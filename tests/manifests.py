"""Round manifests for tests: valid ones with fresh keys, without a key directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nacl.public import PrivateKey
from nacl.signing import SigningKey

from shuffledp.protocol.manifest import Manifest, SignedManifest, StageKeys, sign_manifest
from shuffledp.security.manifests import build_manifest, write_manifest


@dataclass(frozen=True)
class ManifestKeys:
    """The private keys behind a test manifest: X25519 per stage, Ed25519 per stage and the
    coordinator's (stage order: hop 0..H-1, then the analyzer)."""

    boxes: tuple[PrivateKey, ...]
    signers: tuple[SigningKey, ...]
    coordinator: SigningKey


def manifest_keys(n_hops: int = 3) -> ManifestKeys:
    return ManifestKeys(
        boxes=tuple(PrivateKey.generate() for _ in range(n_hops + 1)),
        signers=tuple(SigningKey.generate() for _ in range(n_hops + 1)),
        coordinator=SigningKey.generate(),
    )


def make_manifest(keys: ManifestKeys | None = None, **overrides: Any) -> Manifest:
    """A valid manifest (k = 15, eps0 = 4, 2 client processes of 1,001 and 1,000, 3 hops)
    with ``overrides`` applied; ``keys`` default to fresh ones."""
    keys = keys or manifest_keys(int(overrides.pop("n_hops", 3)))
    stages = [
        StageKeys(box=bytes(box.public_key), sign=bytes(signer.verify_key))
        for box, signer in zip(keys.boxes, keys.signers, strict=True)
    ]
    clients = overrides.pop("clients", (1001, 1000))
    fields: dict[str, Any] = {
        "prefix": "shuffledp-test",
        "rounds": (1,),
        "k": 15,
        "labels": tuple(str(v) for v in range(overrides.get("k", 15))),
        "eps0": 4.0,
        "hops": tuple(stages[:-1]),
        "analyzer": stages[-1],
        "clients": clients,
        "expected": sum(clients),
        "min_batch": sum(clients) // 2,
        "deadline": 60.0,
        "delta": 1e-6,
        "colluders": 0,
        "coordinator": bytes(keys.coordinator.verify_key),
    }
    fields.update(overrides)
    return Manifest(**fields)


def signed_manifest(keys: ManifestKeys | None = None, **overrides: Any) -> SignedManifest:
    keys = keys or manifest_keys(int(overrides.get("n_hops", 3)))
    return sign_manifest(make_manifest(keys, **overrides), keys.coordinator)


def write_round_manifest(keys: Path, path: Path, **overrides: Any) -> Path:
    """A manifest signed with the key directory ``keys``' coordinator key, written to
    ``path``: one round (1) of 4 reports from one client process, k = 3, eps0 = 1, the
    components' former default prefix ``shuffledp``, with ``overrides`` applied."""
    fields: dict[str, Any] = {
        "prefix": "shuffledp",
        "rounds": (1,),
        "k": 3,
        "eps0": 1.0,
        "clients": (4,),
        "min_batch": 2,
        "deadline": 60.0,
        "delta": 1e-6,
    }
    fields.update(overrides)
    return write_manifest(path, build_manifest(keys, **fields), overwrite=True)
