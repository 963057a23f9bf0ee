"""`shuffledp round`: the signed round manifest (`round init FILE`, `round show FILE`).

``round init`` writes the one file every party of a round runs from
(:mod:`shuffledp.protocol.manifest`): k, eps0, the stages' keys from the key directory, the
enrolled client processes, the expected reports, deadline, minimum batch, delta target and
colluders, signed with the key directory's ``coordinator.sign``. ``round show`` prints it for a
person, and with ``--keys`` verifies its signature and its stages against that directory.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from shuffledp.cli.argtypes import integer, positive, probability
from shuffledp.cli.help import add_command
from shuffledp.cli.paths import check_input_file, check_output_file
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.manifest import Manifest, read_manifest
from shuffledp.protocol.record import MAX_K, MAX_ROUND_ID
from shuffledp.security.manifests import (
    build_manifest,
    even_split,
    load_round_manifest,
    write_manifest,
)

__all__ = ["add_parser", "manifest_lines", "parse_rounds"]

DEFAULT_DEADLINE = 300.0
DEFAULT_DELTA = 1e-6
MAX_ROUND_SPAN = 100_000


def add_parser(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "round",
        help="write and show a round's signed manifest",
        description="The round manifest: the one signed file every stage of a round runs from "
        "(k, eps0, the stages' keys, the enrolled clients, the expected reports, deadlines, "
        "the delta target and the colluders the guarantee withstands).",
        examples=[
            "shuffledp round init /tmp/round-1.json --keys /tmp/shuffledp-keys --k 15 --eps0 4 "
            "--n 2000 --client-processes 2",
            "shuffledp round init /tmp/rounds.json --keys /tmp/shuffledp-keys --k 10 --eps0 2 "
            "--process-clients 1001,1000 --round-ids 1-24 --colluders 10",
            "shuffledp round show /tmp/round-1.json --keys /tmp/shuffledp-keys",
        ],
    )
    sub = p.add_subparsers(dest="round_command", metavar="COMMAND", required=True)
    _add_init(sub)
    _add_show(sub)


def _add_init(sub: Any) -> None:
    init = add_command(
        sub,
        "init",
        help="write a signed manifest for a round (or a series of rounds)",
        description="Write FILE (mode 0644) with the round's parameters and the stages' keys "
        "from --keys, signed with DIR/coordinator.sign (`shuffledp keys init` makes it).",
        examples=[
            "shuffledp round init /tmp/round-1.json --keys /tmp/shuffledp-keys --k 15 --eps0 4 "
            "--n 2000 --client-processes 2",
            "shuffledp round init /tmp/rounds.json --keys /tmp/shuffledp-keys --k 10 --eps0 2 "
            "--process-clients 1001,1000 --round-ids 1-24 --colluders 10 --delta 1e-8",
        ],
    )
    init.add_argument("file", type=Path, metavar="FILE", help="the manifest file to write")
    init.add_argument("--keys", type=Path, required=True, metavar="DIR", help="key directory")
    init.add_argument("--prefix", default="shuffledp", metavar="PREFIX", help="topic prefix")
    init.add_argument(
        "--round-ids",
        default="1",
        metavar="IDS",
        help="the round ids this manifest covers: ID, FIRST-LAST or a comma-separated list",
    )
    init.add_argument("--k", type=integer(2, MAX_K), required=True, metavar="K")
    init.add_argument("--eps0", type=positive, required=True, metavar="EPS0")
    who = init.add_mutually_exclusive_group(required=True)
    who.add_argument("--n", type=integer(1), metavar="N", help="expected reports (clients)")
    who.add_argument(
        "--process-clients",
        metavar="COUNTS",
        help="exact clients of each client process, comma-separated (e.g. 1001,1000)",
    )
    init.add_argument(
        "--client-processes",
        type=integer(1, 1 << 16),
        default=1,
        metavar="COUNT",
        help="with --n: split N evenly over C client processes (the first N %% C get one more)",
    )
    _add_round_limits(init)
    init.add_argument("--labels", metavar="FILE", type=Path, help="one value label per line")
    init.add_argument("--no-auth", action="store_true", help="rounds without client envelopes")
    init.add_argument("--overwrite", action="store_true", help="replace an existing FILE")
    init.set_defaults(func=_run_init)


def _add_round_limits(init: argparse.ArgumentParser) -> None:
    init.add_argument(
        "--min-batch",
        type=integer(1),
        metavar="COUNT",
        help="the fewest reports a hop releases (default: half of the expected, at least 1)",
    )
    init.add_argument(
        "--deadline", type=positive, default=DEFAULT_DEADLINE, metavar="SECONDS", help="deadline"
    )
    init.add_argument(
        "--delta", type=probability, default=DEFAULT_DELTA, metavar="DELTA", help="target delta"
    )
    init.add_argument(
        "--colluders",
        type=integer(0),
        default=0,
        metavar="C",
        help="clients the guarantee withstands as colluders (their reports known to the "
        "adversary: the guarantee is computed for n - C)",
    )
    init.add_argument(
        "--hop-workers",
        type=integer(1, 256),
        default=1,
        metavar="W",
        help="every hop as W peelers and a mixer (docs/hop-workers.md; the key directory's "
        "accounts must be made with `keys init --hop-workers W`); 1: one process per hop",
    )
    init.add_argument("--json", action="store_true", help="print the manifest as JSON")


def parse_rounds(text: str) -> tuple[int, ...]:
    """Round ids from ``ID``, ``FIRST-LAST`` or ``A,B,C`` (InvalidParameterError naming
    --round-ids otherwise)."""
    ids: list[int] = []
    try:
        for part in text.split(","):
            first, _, last = part.strip().partition("-")
            low = int(first)
            high = int(last) if last else low
            if high < low or high - low >= MAX_ROUND_SPAN:
                raise ValueError
            ids.extend(range(low, high + 1))
    except ValueError:
        raise InvalidParameterError(
            f"--round-ids must be ID, FIRST-LAST or a comma-separated list of them (at most "
            f"{MAX_ROUND_SPAN} ids), got {text!r}"
        ) from None
    if any(not 0 <= i <= MAX_ROUND_ID for i in ids) or len(set(ids)) != len(ids):
        raise InvalidParameterError(f"--round-ids must be distinct ids in [0, 2^64), got {text!r}")
    return tuple(sorted(ids))


def _clients(args: argparse.Namespace) -> tuple[int, ...]:
    if args.process_clients is None:
        return even_split(args.n, args.client_processes)
    text = args.process_clients
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise InvalidParameterError(
            f"--process-clients must be comma-separated integers, got {text!r}"
        ) from None
    if any(count < 1 for count in counts):
        raise InvalidParameterError(f"--process-clients must be integers >= 1, got {text!r}")
    return counts


def _labels(path: Path | None, k: int) -> tuple[str, ...] | None:
    if path is None:
        return None
    lines = [line.strip() for line in check_input_file("--labels", path).read_text().splitlines()]
    labels = tuple(line for line in lines if line)
    if len(labels) != k:
        raise InvalidParameterError(f"--labels must hold k = {k} labels, got {len(labels)}")
    return labels


def _run_init(args: argparse.Namespace) -> int:
    check_output_file("FILE", args.file)
    clients = _clients(args)
    expected = sum(clients)
    signed = build_manifest(
        args.keys,
        prefix=args.prefix,
        rounds=parse_rounds(args.round_ids),
        k=args.k,
        eps0=args.eps0,
        clients=clients,
        min_batch=args.min_batch if args.min_batch is not None else max(1, expected // 2),
        deadline=args.deadline,
        delta=args.delta,
        colluders=args.colluders,
        labels=_labels(args.labels, args.k),
        client_auth=not args.no_auth,
        hop_workers=args.hop_workers,
    )
    path = write_manifest(args.file, signed, overwrite=args.overwrite)
    if args.json:
        print(json.dumps(signed.to_json()))
    else:
        print("\n".join([f"wrote {path}", *manifest_lines(signed.manifest)]))
    return 0


def _add_show(sub: Any) -> None:
    show = add_command(
        sub,
        "show",
        help="print a manifest for a person (and verify it with --keys)",
        description="Print FILE's fields. With --keys, first verify its signature against "
        "DIR's coordinator key and its stages against DIR's keys (one line and status 2 if "
        "either fails). Without --keys nothing is verified, and the output says so.",
        examples=[
            "shuffledp round show /tmp/round-1.json --keys /tmp/shuffledp-keys",
            "shuffledp round show /tmp/round-1.json --json",
        ],
    )
    show.add_argument("file", type=Path, metavar="FILE", help="the manifest file")
    show.add_argument("--keys", type=Path, metavar="DIR", help="verify against this directory")
    show.add_argument("--json", action="store_true", help="print the manifest as JSON")
    show.set_defaults(func=_run_show)


def _run_show(args: argparse.Namespace) -> int:
    path = check_input_file("FILE", args.file)
    if args.keys is not None:
        manifest = load_round_manifest(path, args.keys)
        status = f"signature: valid (coordinator key of {args.keys})"
    else:
        manifest = read_manifest(path).manifest
        status = "signature: NOT VERIFIED (give --keys DIR to verify it)"
    if args.json:
        print(json.dumps(manifest.to_json()))
    else:
        print("\n".join([str(path), status, *manifest_lines(manifest)]))
    return 0


def manifest_lines(manifest: Manifest) -> list[str]:
    """The manifest for a person, one field a line."""
    rounds = manifest.rounds
    shown_rounds = (
        f"{rounds[0]}" if len(rounds) == 1 else f"{len(rounds)} rounds, {rounds[0]}..{rounds[-1]}"
    )
    clients = manifest.clients
    shown_clients = ", ".join(f"clients-{j}: {count:,}" for j, count in enumerate(clients[:8]))
    if len(clients) > 8:
        shown_clients += f", ... ({len(clients)} processes)"
    labels = ", ".join(manifest.labels[:10]) + (", ..." if manifest.k > 10 else "")
    stages = [
        f"  {name}: box {keys.box.hex()[:16]}..., sign {keys.sign.hex()[:16]}..."
        for name, keys in [
            *((f"hop-{i}", hop) for i, hop in enumerate(manifest.hops)),
            ("analyzer", manifest.analyzer),
        ]
    ]
    return [
        f"digest: {manifest.digest.hex()}",
        f"protocol version: {manifest.protocol_version}; prefix: {manifest.prefix}; "
        f"round: {shown_rounds}",
        f"k-RR: k = {manifest.k}, eps0 = {manifest.eps0:g}; labels: {labels}",
        f"reports expected: {manifest.expected:,} ({shown_clients}); client authentication: "
        f"{'on' if manifest.client_auth else 'off'}",
        f"minimum batch: {manifest.min_batch:,}; deadline: {manifest.deadline:g} s",
        f"guarantee: delta target {manifest.delta:g}, withstanding {manifest.colluders:,} "
        f"colluding clients (computed for n - {manifest.colluders:,})",
        f"hops: {manifest.n_hops}",
        *stages,
        f"coordinator: {manifest.coordinator.hex()[:16]}...",
    ]
