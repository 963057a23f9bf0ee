"""What binds a test round to its manifest: the digest and the hops' Ed25519 signing keys.

The round manifest (its digest is its identity) is built elsewhere; the stages only carry and
check the values it gives them, so the tests use one fixed digest and fresh signing keys.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey, VerifyKey

from shuffledp.protocol.end_statement import EndStatement
from shuffledp.protocol.frames import FrameAssembler, FrameSigner, encode_end

#: The digest every test round runs under (any 32 bytes would do).
MANIFEST_DIGEST = hashlib.sha256(b"shuffledp test round manifest").digest()
#: The digest of another manifest (a report or frame of it must be refused).
OTHER_DIGEST = hashlib.sha256(b"shuffledp another round manifest").digest()
#: Hop i's signing key in the tests' rounds (fresh per test session, from the OS CSPRNG).
HOP_SIGNING_KEYS: tuple[SigningKey, ...] = tuple(SigningKey.generate() for _ in range(8))


def upstream_verify_key(stage_index: int) -> VerifyKey | None:
    """The verify key of the hop before stage ``stage_index`` (None for hop 0)."""
    return None if stage_index == 0 else HOP_SIGNING_KEYS[stage_index - 1].verify_key


def hop_binding(hop_index: int) -> dict[str, Any]:
    """The manifest's values for HopSettings of hop ``hop_index``."""
    return {
        "manifest_digest": MANIFEST_DIGEST,
        "signing_key": HOP_SIGNING_KEYS[hop_index],
        "upstream_verify_key": upstream_verify_key(hop_index),
    }


def hop_verify_keys(n_hops: int) -> tuple[VerifyKey, ...]:
    """Every hop's verify key of an ``n_hops``-hop test round, hop 0 first."""
    return tuple(key.verify_key for key in HOP_SIGNING_KEYS[:n_hops])


def analyzer_binding(n_hops: int) -> dict[str, Any]:
    """The manifest's values for AnalyzerSettings after ``n_hops`` hops."""
    return {"manifest_digest": MANIFEST_DIGEST, "hop_verify_keys": hop_verify_keys(n_hops)}


def frame_signer(sender: int, round_id: int) -> FrameSigner:
    """Hop ``sender``'s signature on its frames of round ``round_id`` of the test manifest."""
    return FrameSigner(
        manifest_digest=MANIFEST_DIGEST,
        round_id=round_id,
        sender=sender,
        signing_key=HOP_SIGNING_KEYS[sender],
    )


def frame_assembler(round_id: int, upstream: int) -> FrameAssembler:
    """The assembler of hop ``upstream``'s frames of round ``round_id`` of the test manifest."""
    return FrameAssembler(
        round_id, MANIFEST_DIGEST, upstream, HOP_SIGNING_KEYS[upstream].verify_key
    )


def signed_end(
    *,
    sender: int,
    round_id: int,
    frames: int,
    messages: int,
    item_length: int,
    stages: dict[str, Any] | None = None,
    aborted: str | None = None,
    signer: FrameSigner | None = None,
) -> bytes:
    """Hop ``sender``'s END frame for ``messages`` in ``frames`` data frames: a statement that
    adds up (accepted = forwarded = messages, nothing rejected), carrying ``stages``; signed by
    ``signer`` (default: hop ``sender``'s test key, for the test manifest)."""
    own = {"accepted": messages, "forwarded": messages, "rejected": {}}
    name = f"hop-{sender}"
    carried = dict(stages or {})
    carried[name] = {**carried.get(name, {}), **own}
    statement = EndStatement(
        stage=name,
        accepted=messages,
        forwarded=messages,
        frames=frames,
        rejected={},
        aborted=aborted,
        upstream_end=None,
        stages=carried,
    )
    if signer is None:
        signer = frame_signer(sender, round_id)
    return encode_end(signer=signer, item_length=item_length, statement=statement)


def manifest_binding(keys: Path, manifest: Path, sender: int) -> tuple[bytes, FrameSigner]:
    """The digest of the round manifest ``manifest`` (signed with ``keys``) and hop
    ``sender``'s frame signer from ``keys``: what a test playing that hop against the
    command-line processes of the round needs."""
    from shuffledp.security.keys import load_signing_key
    from shuffledp.security.manifests import load_round_manifest

    loaded = load_round_manifest(manifest, keys)
    digest = loaded.digest
    signer = FrameSigner(
        manifest_digest=digest,
        round_id=loaded.rounds[0],
        sender=sender,
        signing_key=load_signing_key(keys, f"hop-{sender}"),
    )
    return digest, signer
