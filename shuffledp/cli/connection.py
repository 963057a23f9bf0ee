"""How a component of the round connects to its broker (``shuffledp hop``, ``analyzer``,
``clients`` and the peelers and mixers of shuffledp/cli/hop_workers.py): its account, its client
id and session, its will.

Each component logs in as its stage name with the password in
``KEYS/access/<identity>.password`` (``--no-auth``: anonymously), takes a client id derived from
that secret (:mod:`shuffledp.security.client_ids`), and keeps a persistent session that waits out
a broker restart for ``--reconnect`` seconds (RECONNECT_SECONDS by default).
"""

from __future__ import annotations

import argparse
from typing import Any

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.onion import private_key_to_bytes
from shuffledp.protocol.topics import status_topic
from shuffledp.security.access import load_password
from shuffledp.security.client_ids import random_client_id, stage_client_id

__all__ = [
    "RECONNECT_SECONDS",
    "broker_credentials",
    "id_secret",
    "reconnect_seconds",
    "session_options",
    "will_topic",
]

RECONNECT_SECONDS = 60.0
"""How long a component keeps trying to reconnect to a broker that went away (a restarted
Mosquitto with persistence: the session and its queued messages are still there), unless
--reconnect says otherwise or --no-reconnect."""


def broker_credentials(args: argparse.Namespace, identity: str) -> tuple[str | None, str | None]:
    """(username, password) of ``identity``'s broker account in the key directory, or
    (None, None) with --no-auth. AccessError (one line, exit 2) if the password file is
    missing."""
    if args.no_auth:
        return None, None
    return identity, load_password(args.keys, identity)


def id_secret(username: str | None, password: str | None, key: Any = None) -> bytes | None:
    """What a stage's client id is derived from (:mod:`shuffledp.security.client_ids`): its
    broker password, else its private key (hops and the analyzer), else None (a random id)."""
    if password is not None:
        return f"{username}\0{password}".encode()
    if key is not None:
        return private_key_to_bytes(key)
    return None


def reconnect_seconds(args: argparse.Namespace) -> float:
    """--reconnect SECONDS, RECONNECT_SECONDS by default, 0 with --no-reconnect."""
    if args.no_reconnect:
        if args.reconnect is not None:
            raise InvalidParameterError(
                f"--reconnect and --no-reconnect must not both be given, got --reconnect "
                f"{args.reconnect:g} and --no-reconnect"
            )
        return 0.0
    return RECONNECT_SECONDS if args.reconnect is None else float(args.reconnect)


def session_options(
    args: argparse.Namespace,
    stage: str,
    secret: bytes | None,
    *,
    persistent: bool = False,
) -> dict[str, Any]:
    """MqttTransport options for ``stage``: a client id derived from ``secret`` (stable for a
    restarted process, unguessable without the secret; random without one); with a reconnect
    time (``--reconnect``, the default) or ``persistent``, a persistent session that waits out a
    broker restart for up to that many seconds."""
    reconnect = reconnect_seconds(args)
    if not reconnect >= 0 or reconnect == float("inf"):  # also NaN
        raise InvalidParameterError(f"--reconnect must be finite and >= 0 seconds, got {reconnect}")
    client_id = (
        random_client_id(stage)
        if secret is None
        else stage_client_id(secret, prefix=args.prefix, round_id=args.round, identity=stage)
    )
    if reconnect == 0 and not persistent:
        return {"client_id": client_id}
    return {
        "client_id": client_id,
        "persistent_session": True,
        "reconnect_timeout": reconnect,
        # Without a journal a (re)started process has nothing to resume: it ends whatever
        # session its id left behind (with Mosquitto's use_username_as_clientid, also that of
        # an earlier round under the same account) and starts its own.
        "fresh_session": not persistent,
    }


def will_topic(args: argparse.Namespace, stage: str) -> str:
    return status_topic(args.prefix, args.round, stage)
