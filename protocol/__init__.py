"""shuffledp.protocol: the wire format (pure core) shared by clients, hops and the analyzer.

- :mod:`.record`: the fixed-size plaintext record (version, round id, value, manifest digest,
  random padding);
- :mod:`.onion`: one sealed box per stage, exact per-stage lengths, key helpers;
- :mod:`.topics`: MQTT topic names per round and stage;
- :mod:`.errors`: one ``RejectedMessage`` type per rejection reason, with a counter slug.

Transports (MQTT, in-memory) build on these and live in their own modules.
"""

from __future__ import annotations

from shuffledp.protocol.errors import (
    REJECTION_REASONS,
    REJECTION_TYPES,
    BadVersion,
    DecryptionFailed,
    Duplicate,
    RejectedMessage,
    ValueOutOfRange,
    WrongLength,
    WrongManifest,
    WrongRound,
)
from shuffledp.protocol.onion import (
    KEY_SIZE,
    SEAL_OVERHEAD,
    KeyPair,
    generate_keypair,
    message_length,
    peel,
    private_key_from_bytes,
    private_key_to_bytes,
    public_key_from_bytes,
    public_key_to_bytes,
    wrap,
)
from shuffledp.protocol.record import (
    MANIFEST_DIGEST_SIZE,
    MAX_K,
    MAX_ROUND_ID,
    RECORD_SIZE,
    VERSION,
    Record,
    decode_record,
    encode_record,
    require_manifest_digest,
)
from shuffledp.protocol.topics import analyzer_topic, ingress_topic, validate_prefix

__all__ = [
    "KEY_SIZE",
    "MANIFEST_DIGEST_SIZE",
    "MAX_K",
    "MAX_ROUND_ID",
    "RECORD_SIZE",
    "REJECTION_REASONS",
    "REJECTION_TYPES",
    "SEAL_OVERHEAD",
    "VERSION",
    "BadVersion",
    "DecryptionFailed",
    "Duplicate",
    "KeyPair",
    "Record",
    "RejectedMessage",
    "ValueOutOfRange",
    "WrongLength",
    "WrongManifest",
    "WrongRound",
    "analyzer_topic",
    "decode_record",
    "encode_record",
    "generate_keypair",
    "ingress_topic",
    "message_length",
    "peel",
    "private_key_from_bytes",
    "private_key_to_bytes",
    "public_key_from_bytes",
    "public_key_to_bytes",
    "require_manifest_digest",
    "validate_prefix",
    "wrap",
]
