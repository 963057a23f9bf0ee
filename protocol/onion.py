"""Onion encryption: one PyNaCl sealed box per stage, innermost for the analyzer.

A sealed box (libsodium ``crypto_box_seal``: X25519 + XSalsa20-Poly1305) draws a fresh ephemeral
key pair for every seal, so two wraps of the same record share no bytes an observer could link,
and it adds exactly SEAL_OVERHEAD = 48 bytes (32-byte ephemeral public key + 16-byte Poly1305
tag). With H hops, stages are numbered 0..H: stage i < H is hop i, stage H is the analyzer. The
message stage i receives is ``message_length(i, H)`` bytes long, the same for every message of a
round, so each stage checks the exact length before spending a decryption on it.

Keys are raw 32-byte X25519 keys; how they are stored (hex in files) is the caller's business.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, PublicKey, SealedBox

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.errors import DecryptionFailed, WrongLength
from shuffledp.protocol.record import RECORD_SIZE

KEY_SIZE = 32
SEAL_OVERHEAD = 48


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyPair:
    """An X25519 key pair; ``public`` is the public key of ``private``."""

    private: PrivateKey = field(repr=False)
    public: PublicKey


def generate_keypair() -> KeyPair:
    """A fresh key pair from the OS CSPRNG (libsodium ``randombytes``)."""
    private = PrivateKey.generate()
    return KeyPair(private=private, public=private.public_key)


def public_key_to_bytes(key: PublicKey) -> bytes:
    """The raw 32 bytes of ``key``."""
    return bytes(key)


def private_key_to_bytes(key: PrivateKey) -> bytes:
    """The raw 32 bytes of ``key`` (secret: store with care)."""
    return bytes(key)


def public_key_from_bytes(data: bytes) -> PublicKey:
    """The public key whose raw bytes are ``data``.

    Raises InvalidParameterError unless ``data`` is 32 bytes and a key one can seal to: libsodium
    refuses low-order points (e.g. all zeros), whose shared secret would be known to everyone;
    this finds out at load time (one trial seal) rather than in the middle of a round.
    """
    _check_key_bytes("public key", data)
    key = PublicKey(bytes(data))
    try:
        SealedBox(key).encrypt(b"")
    except CryptoError as exc:
        raise InvalidParameterError(
            f"public key must be a valid X25519 point (not of low order), got {bytes(data).hex()}"
        ) from exc
    return key


def private_key_from_bytes(data: bytes) -> PrivateKey:
    """The private key whose raw bytes are ``data`` (any 32 bytes: X25519 clamps the scalar).

    Raises InvalidParameterError unless ``data`` is 32 bytes.
    """
    _check_key_bytes("private key", data)
    return PrivateKey(bytes(data))


def require_private_key(key: object) -> PrivateKey:
    """``key`` itself if it is a nacl PrivateKey, else InvalidParameterError naming its type."""
    if not isinstance(key, PrivateKey):
        raise InvalidParameterError(
            f"private_key must be a nacl.public.PrivateKey, got {type(key).__name__}"
        )
    return key


def message_length(hop_index: int, n_hops: int, *, record_size: int = RECORD_SIZE) -> int:
    """Exact byte length of every message stage ``hop_index`` receives in a round with
    ``n_hops`` hops: ``record_size + SEAL_OVERHEAD * (n_hops - hop_index + 1)``.

    Stage 0 receives what clients publish; stage ``n_hops`` is the analyzer, whose input is one
    layer around the record. Raises InvalidParameterError unless ``n_hops >= 0``,
    ``0 <= hop_index <= n_hops`` and ``record_size >= 0`` (all integers).
    """
    _check_int("n_hops", n_hops, 0)
    _check_int("hop_index", hop_index, 0)
    _check_int("record_size", record_size, 0)
    if hop_index > n_hops:
        raise InvalidParameterError(
            f"hop_index must be in [0, n_hops] = [0, {n_hops}], got {hop_index}"
        )
    return record_size + SEAL_OVERHEAD * (n_hops - hop_index + 1)


def wrap(
    record: bytes, hop_public_keys: Sequence[PublicKey], analyzer_public_key: PublicKey
) -> bytes:
    """The onion of ``record``: sealed to the analyzer, then to hop H-1, ..., outermost to hop 0.

    The result is ``message_length(0, H, record_size=len(record))`` bytes long, with a fresh
    ephemeral key in every layer (two wraps of the same record differ). Peeling it with the hop
    keys in order 0..H-1 and then the analyzer key returns ``record``.
    """
    ciphertext = SealedBox(analyzer_public_key).encrypt(bytes(record))
    for key in reversed(hop_public_keys):
        ciphertext = SealedBox(key).encrypt(ciphertext)
    return ciphertext


def peel(ciphertext: bytes, private_key: PrivateKey, *, expected_length: int) -> bytes:
    """Remove one layer: the plaintext, exactly ``expected_length - SEAL_OVERHEAD`` bytes.

    Raises WrongLength if ``len(ciphertext) != expected_length`` (checked first, before any
    decryption) and DecryptionFailed if the layer does not open with ``private_key`` (wrong key,
    corruption, forgery); no other exception for any ``bytes`` input. Raises
    InvalidParameterError if ``expected_length < SEAL_OVERHEAD``.
    """
    _check_int("expected_length", expected_length, SEAL_OVERHEAD)
    if len(ciphertext) != expected_length:
        raise WrongLength(
            f"ciphertext length must be {expected_length} bytes at this stage, got {len(ciphertext)}"
        )
    try:
        plaintext: bytes = SealedBox(private_key).decrypt(bytes(ciphertext))
    except CryptoError as exc:
        raise DecryptionFailed(
            f"ciphertext of {expected_length} bytes must open with this stage's key, it does not"
        ) from exc
    return plaintext


def _check_key_bytes(name: str, data: bytes) -> None:
    if not isinstance(data, bytes | bytearray):
        raise InvalidParameterError(f"{name} must be bytes, got {type(data).__name__}")
    if len(data) != KEY_SIZE:
        raise InvalidParameterError(f"{name} must be {KEY_SIZE} bytes, got {len(data)}")


def _check_int(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise InvalidParameterError(f"{name} must be >= {minimum}, got {value}")
