"""Round manifests from a key directory: build, sign, write, and load them as a stage would.

The manifest itself (fields, canonical bytes, digest, signature) is the protocol's
(:mod:`shuffledp.protocol.manifest`); this module joins it to the key directory
(:mod:`shuffledp.security.keys`): the stages' keys come from ``public.json``, the coordinator's
signing key from ``coordinator.sign``, and a stage loading a manifest checks it against the
coordinator key its own directory publishes and against its own keys.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.manifest import (
    Manifest,
    ManifestError,
    SignedManifest,
    StageKeys,
    load_manifest,
    sign_manifest,
)
from shuffledp.protocol.onion import public_key_to_bytes
from shuffledp.security.keys import (
    COORDINATOR,
    PUBLIC_FILE_MODE,
    PublicDirectory,
    load_public_directory,
    load_signing_key,
    stage_names,
)

__all__ = [
    "build_manifest",
    "even_split",
    "load_round_manifest",
    "require_own_keys",
    "write_manifest",
]


def even_split(n: int, processes: int) -> tuple[int, ...]:
    """``n`` clients over ``processes`` client processes, as evenly as possible (the first
    ``n % processes`` get one more): exact counts, summing to ``n``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidParameterError(f"--n must be an integer >= 1, got {n!r}")
    if isinstance(processes, bool) or not isinstance(processes, int) or not 1 <= processes <= n:
        raise InvalidParameterError(
            f"--client-processes must be an integer in [1, --n = {n}], got {processes!r}"
        )
    base, extra = divmod(n, processes)
    return tuple(base + (1 if j < extra else 0) for j in range(processes))


def stage_keys_of(directory: PublicDirectory) -> tuple[tuple[StageKeys, ...], StageKeys]:
    """(the hops' keys, the analyzer's) as the manifest names them, from ``public.json``."""
    boxes = [*directory.hop_keys, directory.analyzer_key]
    keys = [
        StageKeys(box=public_key_to_bytes(box), sign=directory.verify_key(stage), name=stage)
        for stage, box in zip(stage_names(directory.n_hops), boxes, strict=True)
    ]
    return tuple(keys[:-1]), keys[-1]


def build_manifest(
    keys: str | os.PathLike[str],
    *,
    prefix: str,
    rounds: Sequence[int],
    k: int,
    eps0: float,
    clients: Sequence[int],
    min_batch: int,
    deadline: float,
    delta: float,
    colluders: int = 0,
    labels: Sequence[str] | None = None,
    client_auth: bool = True,
    hop_workers: int = 1,
) -> SignedManifest:
    """A manifest for the stages of the key directory ``keys``, signed with its
    ``coordinator.sign`` (ManifestError / KeyDirectoryError naming what is wrong)."""
    directory = load_public_directory(keys)
    hops, analyzer = stage_keys_of(directory)
    manifest = Manifest(
        prefix=prefix,
        rounds=tuple(rounds),
        k=k,
        labels=tuple(labels) if labels is not None else tuple(str(v) for v in range(k)),
        eps0=eps0,
        hops=hops,
        analyzer=analyzer,
        clients=tuple(clients),
        client_auth=client_auth,
        expected=sum(clients),
        min_batch=min_batch,
        deadline=deadline,
        delta=delta,
        colluders=colluders,
        coordinator=directory.verify_key(COORDINATOR),
        hop_workers=hop_workers,
    )
    return sign_manifest(manifest, load_signing_key(keys, COORDINATOR))


def write_manifest(
    path: str | os.PathLike[str], signed: SignedManifest, *, overwrite: bool = False
) -> Path:
    """Write ``signed`` to ``path`` (mode 0644: it holds no secret); an existing file is
    replaced only with ``overwrite`` (ManifestError naming the file otherwise)."""
    target = Path(path)
    if target.exists() and not overwrite:
        raise ManifestError(f"{target}: manifest file already exists (--overwrite replaces it)")
    temporary = target.with_name(f".{target.name}.tmp")
    temporary.write_text(signed.dumps(), encoding="utf-8")
    os.chmod(temporary, PUBLIC_FILE_MODE)
    os.replace(temporary, target)
    return target


def load_round_manifest(path: str | os.PathLike[str], keys: str | os.PathLike[str]) -> Manifest:
    """The manifest in ``path``, verified against the coordinator key that the key directory
    ``keys`` publishes, and naming exactly that directory's stages (ManifestError naming the
    field otherwise): what every stage does first."""
    directory = load_public_directory(keys)
    manifest = load_manifest(path, directory.verify_key(COORDINATOR))
    hops, analyzer = stage_keys_of(directory)
    if manifest.n_hops != directory.n_hops:
        raise ManifestError(
            f"{path}: manifest field hops names {manifest.n_hops} hops, the key directory "
            f"{keys} has {directory.n_hops}"
        )
    for stage, published in zip(stage_names(directory.n_hops), [*hops, analyzer], strict=True):
        named = manifest.stage_keys(stage)
        if named != published:
            field = "analyzer" if stage == "analyzer" else f"hops[{stage[4:]}]"
            raise ManifestError(
                f"{path}: manifest field {field} must be {stage}'s keys in the key directory "
                f"{keys}, it is not (a manifest of another deployment?)"
            )
    return manifest


def require_own_keys(manifest: Manifest, stage: str, box_public: bytes, verify: bytes) -> None:
    """ManifestError unless ``stage``'s own keys (its X25519 public key and Ed25519 verify
    key, from its private files) are the ones the manifest names for it."""
    named = manifest.stage_keys(stage)
    if named.box != box_public:
        raise ManifestError(
            f"{stage}'s private key ({box_public.hex()[:16]}...) is not the one the manifest "
            f"names for it ({named.box.hex()[:16]}...)"
        )
    if named.sign != verify:
        raise ManifestError(
            f"{stage}'s signing key ({verify.hex()[:16]}...) is not the one the manifest names "
            f"for it ({named.sign.hex()[:16]}...)"
        )
