"""MQTT client ids derived from a stage's secret (shuffledp.security.client_ids) and the CLI's
choice of secret (on the brokers: tests/integration/test_access_brokers.py)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from shuffledp.cli.connection import id_secret as _id_secret
from shuffledp.cli.connection import session_options as _session
from shuffledp.cli.main import build_parser
from shuffledp.security.access import init_access, load_password
from shuffledp.security.client_ids import (
    client_id_belongs,
    random_client_id,
    stage_client_id,
)
from shuffledp.security.keys import init_key_directory, load_hop_key

SECRET = bytes(range(32))


def _id(
    secret: bytes = SECRET, *, prefix: str = "p", round_id: int = 7, identity: str = "hop-0"
) -> str:
    return stage_client_id(secret, prefix=prefix, round_id=round_id, identity=identity)


def test_same_secret_same_id_for_a_restarted_stage() -> None:
    # Known answer: HMAC-SHA256(secret, domain | "p\0" "7\0" "hop-0")[:16], written out here
    # so that a changed derivation (which would orphan every persistent session) is noticed.
    import hmac

    expected = hmac.new(
        SECRET, b"shuffledp/mqtt-client-id/v1\x00p\x007\x00hop-0", "sha256"
    ).hexdigest()[:32]
    assert _id() == f"sdp-hop-0-{expected}" == _id()


def test_ids_differ_by_secret_round_prefix_and_identity() -> None:
    ids = {
        _id(),
        _id(bytes(32)),
        _id(round_id=8),
        _id(prefix="q"),
        _id(identity="hop-1"),
        _id(identity="analyzer"),
    }
    assert len(ids) == 6


def test_id_is_not_computable_from_public_facts() -> None:
    """The old id, sdp-<stage>-sha256(prefix, round)[:12], is what anyone could compute; the
    new one depends on the secret: 200 random secrets give 200 different ids for the same
    public inputs (a collision of 128-bit values has probability < 2^-110), none equal to
    the public formula's nor containing it."""
    public = hashlib.sha256(b"p\x007").hexdigest()[:12]
    ids = {_id(os.urandom(32)) for _ in range(200)}
    assert len(ids) == 200
    assert all(public not in client_id for client_id in ids)
    assert all(client_id.startswith("sdp-hop-0-") and len(client_id) == 42 for client_id in ids)


@pytest.mark.parametrize(
    ("secret", "kwargs", "rule"),
    [
        (b"short", {}, "secret must be at least 16 bytes"),
        (SECRET, {"identity": "hop 0"}, "stage identity must be"),
        (SECRET, {"prefix": ""}, "--prefix must be a non-empty string"),
        (SECRET, {"round_id": -1}, "round_id"),
    ],
)
def test_bad_inputs_are_refused(secret: bytes, kwargs: dict[str, object], rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        _id(secret, **kwargs)  # type: ignore[arg-type]


def test_client_id_namespaces_of_accounts() -> None:
    assert client_id_belongs(_id(identity="hop-0"), "hop-0")
    assert client_id_belongs("hop-0", "hop-0")  # Mosquitto's use_username_as_clientid
    assert not client_id_belongs(_id(identity="hop-0"), "clients-0")
    assert not client_id_belongs(_id(identity="clients-10"), "clients-1")
    assert not client_id_belongs("sdp-hop-0", "hop-0")
    assert not client_id_belongs("x-sdp-hop-0-1", "hop-0")
    assert not client_id_belongs(_id(), "")
    fresh = random_client_id("monitor")
    assert client_id_belongs(fresh, "monitor") and fresh != random_client_id("monitor")


def test_cli_derives_ids_from_the_password_or_the_private_key(tmp_path: Path) -> None:
    init_key_directory(tmp_path, hops=1)
    init_access(tmp_path, hops=1, client_processes=1, prefix="p")
    parser = build_parser()
    argv = ["hop", "--keys", str(tmp_path), "--index", "0", "--expected", "5", "--prefix", "p"]
    argv += ["--manifest", str(tmp_path / "round.json"), "--round", "1"]  # parsed, not read
    args = parser.parse_args(argv)
    password = load_password(tmp_path, "hop-0")
    with_account = _session(args, "hop-0", _id_secret("hop-0", password))
    again = _session(args, "hop-0", _id_secret("hop-0", password))
    assert with_account == again  # a restarted hop finds its session
    # Reconnecting by default: a persistent session, 60 s to wait out a broker restart.
    assert with_account["persistent_session"] is True
    assert with_account["reconnect_timeout"] == 60.0
    assert with_account["fresh_session"] is True  # no journal: nothing to resume
    journaled = _session(args, "hop-0", _id_secret("hop-0", password), persistent=True)
    assert journaled["fresh_session"] is False  # a journal: resume the broker's session
    key_secret = _id_secret(None, None, load_hop_key(tmp_path, 0))
    without_account = _session(args, "hop-0", key_secret)
    assert without_account["client_id"] != with_account["client_id"]
    assert client_id_belongs(without_account["client_id"], "hop-0")
    # Nothing secret (a client process with --no-auth): a random id per process.
    assert (
        _session(args, "clients-0", None)["client_id"]
        != _session(args, "clients-0", None)["client_id"]
    )


def test_reconnect_is_the_default_and_no_reconnect_turns_it_off(tmp_path: Path) -> None:
    parser = build_parser()
    base = ["clients", "--keys", str(tmp_path), "--k", "2", "--eps0", "1", "--values", "synthetic"]
    base += ["--manifest", str(tmp_path / "round.json"), "--prefix", "p", "--round", "1"]
    off = _session(parser.parse_args([*base, "--no-reconnect"]), "clients-0", SECRET)
    assert set(off) == {"client_id"}  # no persistent session, no reconnection
    short = _session(parser.parse_args([*base, "--reconnect", "5"]), "clients-0", SECRET)
    assert short["reconnect_timeout"] == 5.0
    both = parser.parse_args([*base, "--reconnect", "5", "--no-reconnect"])
    with pytest.raises(ValueError, match="--reconnect and --no-reconnect must not both be given"):
        _session(both, "clients-0", SECRET)
