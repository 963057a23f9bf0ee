"""A component's flags against the round manifest it runs from.

``hop``, ``analyzer`` and ``clients`` take ``--manifest FILE``: the round's k, eps0, expected
reports, minimum batch, deadline, delta target, prefix and round ids come from it, never from
a flag alone. A flag that repeats the manifest's value is accepted; one that contradicts it
refuses the start in one line naming the flag and the manifest's field (exit status 2), before
any broker is contacted: ``--eps0 1 contradicts the manifest's eps0 = 4 (round.json)``.

After :func:`apply_manifest` the parsed arguments carry the manifest's values under the flags'
names (``args.k``, ``args.eps0``, ``args.expected``, ...), so the rest of a component reads
its settings as before, and ``args.manifest_obj`` holds the verified :class:`Manifest`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from shuffledp.protocol.manifest import Manifest, ManifestError
from shuffledp.security.manifests import load_round_manifest

__all__ = ["FlagField", "apply_manifest"]

FlagField = tuple[str, str, str]
"""(the flag, the attribute of the parsed arguments, the manifest's field)."""

#: Every flag a component may take that the manifest also states, by component.
_SHARED: tuple[FlagField, ...] = (("--prefix", "prefix", "prefix"),)
_FIELDS: dict[str, tuple[FlagField, ...]] = {
    "hop": (
        ("--expected", "expected", "expected"),
        ("--min-batch", "min_batch", "min_batch"),
        ("--deadline", "deadline", "deadline"),
    ),
    "analyzer": (
        ("--k", "k", "k"),
        ("--eps0", "eps0", "eps0"),
        ("--expected", "expected", "expected"),
        ("--deadline", "deadline", "deadline"),
        ("--delta", "delta", "delta"),
    ),
    "clients": (("--k", "k", "k"), ("--eps0", "eps0", "eps0")),
}


def apply_manifest(args: argparse.Namespace, command: str) -> Manifest:
    """Load and verify ``args.manifest`` against the key directory ``args.keys``, refuse any
    flag that contradicts it, and fill the flags' attributes from it (module docstring)."""
    manifest = load_round_manifest(args.manifest, args.keys)
    fields = (*_SHARED, *_FIELDS[command])
    _refuse_contradictions(args, manifest, fields)
    for _, attribute, name in fields:
        setattr(args, attribute, getattr(manifest, name))
    args.round = _round(args, manifest)
    _check_auth(args, manifest, command)
    args.manifest_obj = manifest
    return manifest


def _refuse_contradictions(
    args: argparse.Namespace, manifest: Manifest, fields: Sequence[FlagField]
) -> None:
    for flag, attribute, name in fields:
        given: Any = getattr(args, attribute, None)
        wanted: Any = getattr(manifest, name)
        if given is not None and given != wanted:
            raise ManifestError(
                f"{flag} {_shown(given)} contradicts the manifest's {name} = {_shown(wanted)} "
                f"({args.manifest}): {name} comes from the manifest; drop {flag}"
            )


def _round(args: argparse.Namespace, manifest: Manifest) -> int:
    """``--round``, which must be one of the manifest's rounds; without it, the manifest's
    only round (a manifest of several rounds needs ``--round``)."""
    if args.round is None:
        if len(manifest.rounds) != 1:
            raise ManifestError(
                f"--round is needed: the manifest ({args.manifest}) covers "
                f"{len(manifest.rounds)} rounds, {manifest.rounds[0]}..{manifest.rounds[-1]}"
            )
        return manifest.rounds[0]
    if not manifest.covers(args.round):
        raise ManifestError(
            f"--round {args.round} contradicts the manifest's rounds ({args.manifest}: "
            f"{_rounds(manifest)}): a round the manifest does not cover cannot run"
        )
    return int(args.round)


def _check_auth(args: argparse.Namespace, manifest: Manifest, command: str) -> None:
    """Client authentication is the manifest's choice: hop 0 and the client processes must
    agree with it (``--no-auth`` turns it off together with the broker accounts)."""
    if command == "analyzer" or (command == "hop" and args.index != 0):
        return
    if args.no_auth == manifest.client_auth:
        state = "on" if manifest.client_auth else "off"
        flag = "--no-auth" if args.no_auth else "the absence of --no-auth"
        raise ManifestError(
            f"{flag} contradicts the manifest's client_auth = {str(manifest.client_auth).lower()} "
            f"({args.manifest}): client authentication is {state} for this round"
        )


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _rounds(manifest: Manifest) -> str:
    rounds = manifest.rounds
    if len(rounds) <= 5:
        return ", ".join(map(str, rounds))
    return f"{len(rounds)} rounds, {rounds[0]}..{rounds[-1]}"
