"""Why a received message was rejected: one exception type per reason.

Every type subclasses :class:`RejectedMessage` (itself a ``ValueError``) and carries a class
attribute ``reason``, a short stable slug that hops and the analyzer use as the key of their
``rejected`` counters (and that reports print). Messages name what was expected and what was
found. Only messages from the network raise these; a caller passing a bad parameter (k, a round
id, a key of the wrong size) gets ``InvalidParameterError`` instead, so it is never counted as a
rejected message.

Random record padding is not checked, so there is no "bad-padding" reason (see record.py).
"""

from __future__ import annotations

from typing import ClassVar

# The base lives in shuffledp.errors (one tree for the package); re-exported here.
from shuffledp.errors import RejectedMessage as RejectedMessage


class WrongLength(RejectedMessage):
    """A ciphertext or record whose byte length is not the one fixed for its hop and round."""

    reason: ClassVar[str] = "wrong-length"


class DecryptionFailed(RejectedMessage):
    """A ciphertext of the right length that does not open with this stage's private key:
    addressed to another key, corrupted, or forged (the Poly1305 tag does not verify)."""

    reason: ClassVar[str] = "decryption-failed"


class BadVersion(RejectedMessage):
    """A record whose version byte is not the one this code speaks."""

    reason: ClassVar[str] = "bad-version"


class WrongManifest(RejectedMessage):
    """A well-formed record sealed under another round manifest (its 32-byte digest is not the
    one this round runs under: a report of another deployment, task or parameter set)."""

    reason: ClassVar[str] = "wrong-manifest"


class WrongRound(RejectedMessage):
    """A well-formed record from another round (a replay across rounds, or a stale client)."""

    reason: ClassVar[str] = "wrong-round"


class ValueOutOfRange(RejectedMessage):
    """A record whose reported value is not in [0, k)."""

    reason: ClassVar[str] = "value-out-of-range"


class Duplicate(RejectedMessage):
    """A ciphertext a hop has already seen in this round (exact copy, detected by the hop's
    per-round seen-set of digests; nothing in this package raises it, hops do)."""

    reason: ClassVar[str] = "duplicate"


class UnknownClient(RejectedMessage):
    """An authenticated message (hop 0, client authentication on) whose client id is outside
    the enrolled roster (protocol/client_auth.py)."""

    reason: ClassVar[str] = "unknown-client"


class BadAuthenticator(RejectedMessage):
    """An authenticated message whose tag does not verify under its client's key for this
    round: forged, corrupted, moved from another client, onion or round."""

    reason: ClassVar[str] = "bad-authenticator"


class ClientAlreadyReported(RejectedMessage):
    """An authentic message from a client whose report hop 0 already took in this round
    (one report per enrolled client per round; raised by nothing here, hop 0 counts it)."""

    reason: ClassVar[str] = "client-already-reported"


class ForgedEnd(RejectedMessage):
    """An END frame whose statement, signed or not, is not well formed or does not add up
    (protocol/end_statement.py; the frame assembler counts it per frame, not per message)."""

    reason: ClassVar[str] = "forged-end"


CLIENT_AUTH_REJECTION_TYPES: tuple[type[RejectedMessage], ...] = (
    UnknownClient,
    BadAuthenticator,
    ClientAlreadyReported,
)
"""The reasons only hop 0 with client authentication rejects for, in the order it checks."""

REJECTION_TYPES: tuple[type[RejectedMessage], ...] = (
    WrongLength,
    DecryptionFailed,
    BadVersion,
    WrongManifest,
    WrongRound,
    ValueOutOfRange,
    Duplicate,
)
"""Every concrete rejection type, in the order reports list them."""

REJECTION_REASONS: tuple[str, ...] = tuple(t.reason for t in REJECTION_TYPES)
"""Every reason slug (distinct), e.g. to start a round's counters at zero."""
