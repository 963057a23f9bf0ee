"""What binds a test round to its manifest: the digest and the hops' Ed25519 signing keys.

The round manifest (its digest is its identity) is built elsewhere; the stages only carry and
check the values it gives them, so the tests use one fixed digest and fresh signing keys.
"""

from __future__ import annotations

import hashlib

from nacl.signing import SigningKey

#: The digest every test round runs under (any 32 bytes would do).
MANIFEST_DIGEST = hashlib.sha256(b"shuffledp test round manifest").digest()
#: The digest of another manifest (a report or frame of it must be refused).
OTHER_DIGEST = hashlib.sha256(b"shuffledp another round manifest").digest()
#: Hop i's signing key in the tests' rounds (fresh per test session, from the OS CSPRNG).
HOP_SIGNING_KEYS: tuple[SigningKey, ...] = tuple(SigningKey.generate() for _ in range(8))


def upstream_verify_key(stage_index: int) -> object:
    """The verify key of the hop before stage ``stage_index`` (None for hop 0)."""
    return None if stage_index == 0 else HOP_SIGNING_KEYS[stage_index - 1].verify_key
