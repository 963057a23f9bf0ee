"""MQTT client ids nobody else can compute: a stage's session is its own.

Why: an MQTT broker disconnects a connected client when another connects under the same client
id, and hands the newcomer the persistent session (its subscriptions, its queued messages). A
client id computable from public facts (the topic prefix and the round) let any client account
take over hop 0's session. Here a stage's client id is a pseudo-random function of a secret only
that stage holds::

    sdp-<identity>-<hex of HMAC-SHA256(secret, DOMAIN | prefix | 0 | round | 0 | identity)[:16]>

``secret``: the stage's broker password (every identity has one, ``keys init``), or without
broker accounts a hop's or the analyzer's private key; 128 bits of the HMAC are kept. The same
stage restarted with the same key directory, prefix and round finds its persistent session again
(the id is stable); the id of another round, prefix or identity is unrelated. The ``sdp-<identity>-``
part names the account the id belongs to: the embedded broker refuses a CONNECT whose id is not
in the namespace of the account that logs in (:func:`client_id_belongs`), and the generated
Mosquitto configurations replace every client id by the account name
(``use_username_as_clientid``), so that no account can connect under another's id.
"""

from __future__ import annotations

import hmac
import secrets

from shuffledp.errors import InvalidParameterError
from shuffledp.validation import require_int

__all__ = [
    "CLIENT_ID_PREFIX",
    "DOMAIN",
    "client_id_belongs",
    "random_client_id",
    "stage_client_id",
]

CLIENT_ID_PREFIX = "sdp-"
DOMAIN = b"shuffledp/mqtt-client-id/v1\x00"
#: Bytes of the HMAC kept in the id (128 bits: guessing is hopeless).
ID_BYTES = 16
MIN_SECRET_BYTES = 16


def _require_identity(identity: object) -> str:
    if (
        not isinstance(identity, str)
        or not identity
        or not all(c.isascii() and (c.isalnum() or c == "-") for c in identity)
    ):
        raise InvalidParameterError(
            f"stage identity must be letters, digits and '-' (hop-0, analyzer, clients-1, ...), "
            f"got {identity!r}"
        )
    return identity


def stage_client_id(secret: bytes, *, prefix: str, round_id: int, identity: str) -> str:
    """The client id of ``identity``'s connection for (``prefix``, ``round_id``), keyed by
    ``secret`` (module docstring): stable for the same inputs, unpredictable without
    ``secret``. InvalidParameterError for a secret shorter than 16 bytes or bad inputs."""
    if not isinstance(secret, bytes) or len(secret) < MIN_SECRET_BYTES:
        size = len(secret) if isinstance(secret, bytes) else type(secret).__name__
        raise InvalidParameterError(
            f"client id secret must be at least {MIN_SECRET_BYTES} bytes, got {size}"
        )
    if not isinstance(prefix, str) or not prefix:
        raise InvalidParameterError(f"--prefix must be a non-empty string, got {prefix!r}")
    require_int("round_id", round_id, 0)
    name = _require_identity(identity)
    message = DOMAIN + f"{prefix}\0{round_id}\0{name}".encode()
    digest = hmac.digest(secret, message, "sha256")[:ID_BYTES]
    return f"{CLIENT_ID_PREFIX}{name}-{digest.hex()}"


def random_client_id(identity: str) -> str:
    """A fresh ``sdp-<identity>-<32 random hex digits>`` (OS CSPRNG), for a connection that
    need not find a session again (nothing secret to derive it from, or no session kept)."""
    return f"{CLIENT_ID_PREFIX}{_require_identity(identity)}-{secrets.token_hex(ID_BYTES)}"


def client_id_belongs(client_id: str, username: str) -> bool:
    """True iff ``client_id`` is in account ``username``'s namespace: exactly ``username``
    (what Mosquitto's ``use_username_as_clientid`` makes of every id) or
    ``sdp-<username>-...``. No account name is another's followed by '-', so no id belongs
    to two accounts."""
    if not isinstance(client_id, str) or not isinstance(username, str) or not username:
        return False
    return client_id == username or client_id.startswith(f"{CLIENT_ID_PREFIX}{username}-")
