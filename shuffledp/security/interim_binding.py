"""INTERIM (to be deleted when the signed round manifest lands): what binds a round's stages.

The stages take three values from the round manifest (issue 23): its 32-byte digest, a hop's
Ed25519 signing key and the upstream hop's verify key. Until the manifest exists, the command
line and the simulations derive them here:

- the digest: SHA-256 of ``shuffledp/interim-round-binding/v0\\0`` and a canonical JSON of the
  prefix, the round id and the key directory's public box keys (what every process of a round
  has in common);
- the signing keys: ``KEYS/hop-<i>.sign`` (hex of the 32-byte Ed25519 seed) and the verify keys
  from ``public.json``'s ``"signing"`` object, once ``keys init`` writes them; a key directory
  without them gets keys derived from the public box keys, which ANYONE can derive: they bind
  frames to a stage and a round but authenticate nothing (logged at INFO level, not as a
  warning: a command's stderr keeps its one line).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from pathlib import Path

from nacl.signing import SigningKey, VerifyKey

from shuffledp.security.keys import KeyDirectoryError, PublicDirectory, public_file_path

__all__ = ["interim_manifest_digest", "interim_signing_key", "interim_verify_key"]

logger = logging.getLogger("shuffledp.interim")

_HEX_SEED = re.compile(r"[0-9a-fA-F]{64}")


def interim_manifest_digest(prefix: str, round_id: int, directory: PublicDirectory) -> bytes:
    """The interim digest of round ``round_id`` under ``prefix`` with ``directory``'s keys."""
    document = {
        "prefix": prefix,
        "round": round_id,
        "hops": [bytes(key).hex() for key in directory.hop_keys],
        "analyzer": bytes(directory.analyzer_key).hex(),
    }
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(b"shuffledp/interim-round-binding/v0\0" + canonical).digest()


def _published_signing_keys(keys: str | os.PathLike[str]) -> dict[str, str] | None:
    try:
        document = json.loads(public_file_path(keys).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise KeyDirectoryError(f"{public_file_path(keys)}: cannot be read ({exc})") from exc
    signing = document.get("signing") if isinstance(document, dict) else None
    return signing if isinstance(signing, dict) else None


def _insecure_seed(directory: PublicDirectory, hop_index: int) -> bytes:
    logger.info(
        "INTERIM: the key directory has no signing keys (public.json 'signing'); hop-%d's "
        "frame signatures use a key derived from public data and authenticate nothing",
        hop_index,
    )
    public = bytes(directory.hop_keys[hop_index])
    return hashlib.sha256(
        b"shuffledp/interim-insecure-signing-seed/v0\0" + f"hop-{hop_index}\0".encode() + public
    ).digest()


def interim_signing_key(
    keys: str | os.PathLike[str], directory: PublicDirectory, hop_index: int
) -> SigningKey:
    """Hop ``hop_index``'s signing key: ``KEYS/hop-<i>.sign`` if the directory publishes
    signing keys, else the insecure derived one (module docstring)."""
    if _published_signing_keys(keys) is None:
        return SigningKey(_insecure_seed(directory, hop_index))
    path = Path(keys) / f"hop-{hop_index}.sign"
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyDirectoryError(f"{path}: cannot be read ({type(exc).__name__})") from exc
    if not _HEX_SEED.fullmatch(text):
        raise KeyDirectoryError(f"{path} must hold 64 hex digits (an Ed25519 seed)")
    return SigningKey(bytes.fromhex(text))


def interim_verify_key(
    keys: str | os.PathLike[str], directory: PublicDirectory, hop_index: int
) -> VerifyKey:
    """Hop ``hop_index``'s verify key: ``public.json``'s ``signing["hop-<i>"]``, else the
    insecure derived one (module docstring)."""
    published = _published_signing_keys(keys)
    if published is None:
        return SigningKey(_insecure_seed(directory, hop_index)).verify_key
    value = published.get(f"hop-{hop_index}")
    if not isinstance(value, str) or not _HEX_SEED.fullmatch(value):
        raise KeyDirectoryError(
            f"{public_file_path(keys)}: signing['hop-{hop_index}'] must be 64 hex digits, "
            f"got {value!r}"
        )
    return VerifyKey(bytes.fromhex(value))
