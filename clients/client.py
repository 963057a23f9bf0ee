"""What clients publish in one round: k-RR, then the fixed-size record, then the onion (pure core).

The client process (asyncio, MQTT) hosts many simulated clients and publishes these messages to
the first hop's ingress topic; this module does everything before that.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy.typing as npt
from nacl.public import PublicKey

from shuffledp.clients.krr import krr_randomize
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.client_auth import ClientCredential, seal_envelope
from shuffledp.protocol.onion import wrap
from shuffledp.protocol.record import (
    MAX_K,
    MAX_ROUND_ID,
    encode_record,
    require_manifest_digest,
)
from shuffledp.randomness import RandomLike

__all__ = ["make_client_messages"]


def make_client_messages(
    values: npt.ArrayLike,
    *,
    k: int,
    eps0: float,
    round_id: int,
    manifest_digest: bytes,
    hop_public_keys: Sequence[PublicKey],
    analyzer_public_key: PublicKey,
    rng: RandomLike = None,
    credentials: Sequence[ClientCredential] | None = None,
) -> list[bytes]:
    """One message per value, in the order of ``values``: k-RR(eps0) of the value, encoded as a
    record of round ``round_id`` under the round manifest whose digest is ``manifest_digest``
    (random padding from ``os.urandom``) and wrapped in one sealed
    box per hop, innermost for the analyzer.

    Guarantees: every message is ``message_length(0, len(hop_public_keys))`` bytes; peeling with
    the hop keys in order and then the analyzer key gives a record of round ``round_id`` and
    manifest ``manifest_digest`` whose
    value is the k-RR report, each report an independent draw from ``rng`` (the OS CSPRNG unless
    a source is passed). Sealed boxes use fresh ephemeral keys, so equal reports give unrelated
    messages. No I/O.

    With ``credentials`` (one per value, in the same order) each onion is put in its client's
    authenticator envelope for ``round_id`` (protocol/client_auth.py), 40 bytes longer.

    Raises InvalidParameterError unless k is an integer in [2, 2^32], eps0 finite > 0, round_id
    an integer in [0, 2^64), manifest_digest 32 bytes, the values integers in [0, k), ``hop_public_keys`` a non-empty
    sequence of PublicKey (no hop means no shuffle, hence no shuffle-model guarantee) and
    ``analyzer_public_key`` a PublicKey.
    """
    hops = _check_message_parameters(k, round_id, hop_public_keys, analyzer_public_key)
    digest = require_manifest_digest(manifest_digest)
    reports = krr_randomize(values, k, eps0, rng)
    onions = [
        wrap(
            encode_record(round_id, int(report), k, manifest_digest=digest),
            hops,
            analyzer_public_key,
        )
        for report in reports
    ]
    if credentials is None:
        return onions
    return _in_envelopes(onions, credentials, round_id)


def _check_message_parameters(
    k: int, round_id: int, hop_public_keys: Sequence[PublicKey], analyzer_public_key: PublicKey
) -> list[PublicKey]:
    """The hop keys as a list, after checking k, round_id and the keys (InvalidParameterError
    unless they are what make_client_messages needs, its docstring)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= MAX_K:
        raise InvalidParameterError(f"k must be an integer in [2, 2^32], got {k!r}")
    if isinstance(round_id, bool) or not isinstance(round_id, int):
        raise InvalidParameterError(f"round_id must be an integer, got {round_id!r}")
    if not 0 <= round_id <= MAX_ROUND_ID:
        raise InvalidParameterError(f"round_id must be in [0, 2^64), got {round_id}")
    hops = list(hop_public_keys)
    if not hops:
        raise InvalidParameterError("hop_public_keys must name at least one hop, got none")
    for index, key in enumerate(hops):
        if not isinstance(key, PublicKey):
            raise InvalidParameterError(
                f"hop_public_keys[{index}] must be a nacl.public.PublicKey, "
                f"got {type(key).__name__}"
            )
    if not isinstance(analyzer_public_key, PublicKey):
        raise InvalidParameterError(
            "analyzer_public_key must be a nacl.public.PublicKey, "
            f"got {type(analyzer_public_key).__name__}"
        )
    return hops


def _in_envelopes(
    onions: list[bytes], credentials: Sequence[ClientCredential], round_id: int
) -> list[bytes]:
    """Each onion in its client's authenticator envelope for ``round_id`` (one credential per
    onion, same order)."""
    if len(credentials) != len(onions):
        raise InvalidParameterError(
            f"credentials must be one per value, got {len(credentials)} for {len(onions)} values"
        )
    return [
        seal_envelope(credential, round_id, onion)
        for credential, onion in zip(credentials, onions, strict=True)
    ]
