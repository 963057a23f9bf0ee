"""`shuffledp hop`, `shuffledp analyzer`, `shuffledp clients`: each component as its own process.

Each runs one round against a broker URL and a key directory (`shuffledp keys init`), as a
deployment would; `shuffledp simulate` only launches these. They share nothing but the broker,
the topic prefix and round id, and the key directory (hops and the analyzer read their private
key; clients read the public directory, and with client authentication their process key in
``access/``).

Exit codes: 0 done; 2 bad input (one line on stderr: a flag, a missing key file, an output path
that cannot be written, all checked before the broker is contacted); 1 the broker could not be
reached or refused this component's account, or another failure (one line); 3 the round was
refused (a hop held fewer than its minimum batch, or an upstream hop refused); 4 a stage did not
become ready in time; 5 genuine reports were lost (one line saying how many and where, e.g.
``lost 1,613 of 20,000 reports between clients and hop-0``; ``--accept-loss`` publishes the
smaller round instead, and the report says so); 6 (analyzer) the round's report was already
published and this run derived another outcome: it published nothing, one line says what is
published (a round's report is written once; a rerun that re-derives the same outcome from its
journal exits 0 and prints the published report); 130 interrupted.

Broker accounts: each component logs in as its stage name (hop-<i>, analyzer, clients-<j>, the
``--name`` of a client process) with the password in ``KEYS/access/<identity>.password``
(:mod:`shuffledp.security.access`); ``--no-auth`` connects anonymously, for an open broker.
``--broker mqtts://HOST[:PORT]`` connects over TLS and verifies the broker's certificate
against ``--tls-ca FILE`` (``KEYS/tls/ca.pem`` of ``shuffledp keys init --tls``) or the system's
trust store (:mod:`shuffledp.security.tls`).

Client authentication (secure by default, switched off by the same ``--no-auth``): a client
process ``clients-<j>`` puts each report in its client's authenticator envelope with the keys
derived from ``KEYS/access/clients-<j>.clientkey``; hop 0 checks them with
``KEYS/access/client-master.key`` and takes one report per enrolled client per round
(:mod:`shuffledp.protocol.client_auth`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from shuffledp.cli.argtypes import integer, non_negative, positive, probability
from shuffledp.cli.broker_urls import broker_urls, client_broker, hop_connection
from shuffledp.cli.connection import (
    RECONNECT_SECONDS,
    broker_credentials,
    id_secret,
    session_options,
    will_topic,
)
from shuffledp.cli.help import add_command
from shuffledp.cli.manifest_flags import apply_manifest
from shuffledp.cli.outcome import EXIT_NOT_READY, EXIT_REFUSED, hop_exit_status, run_component
from shuffledp.cli.paths import check_input_file, check_output_dir, check_output_file
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.client_auth import ClientRoster
from shuffledp.protocol.delivery import EXIT_LOST
from shuffledp.protocol.manifest import Manifest, ManifestError
from shuffledp.protocol.mqtt import MqttTransport, parse_broker_address
from shuffledp.protocol.record import MAX_K, MAX_ROUND_ID
from shuffledp.randomness import default_source
from shuffledp.security.access import load_client_verifier, load_process_credentials
from shuffledp.security.keys import (
    MAX_HOPS,
    load_analyzer_key,
    load_hop_key,
    load_public_directory,
    load_signing_key,
)
from shuffledp.security.manifests import require_own_keys

if TYPE_CHECKING:
    from nacl.signing import SigningKey, VerifyKey

    from shuffledp.clients.service import ClientSettings
    from shuffledp.protocol.client_auth import ProcessCredentials
    from shuffledp.randomness import RandomSource
    from shuffledp.security.keys import PublicDirectory
    from shuffledp.shuffler.service import HopSettings

__all__ = ["EXIT_NOT_READY", "EXIT_REFUSED", "add_parsers", "read_values"]

DEFAULT_BROKER = "mqtt://127.0.0.1:1883"


_KEYS_EXAMPLE = "shuffledp keys init /tmp/shuffledp-keys --hops 3   # once, before any component"
_ROUND_EXAMPLE = (
    "shuffledp round init /tmp/round-1.json --keys /tmp/shuffledp-keys --k 15 --eps0 4 --n 1000"
    "   # once per round"
)
_RUN = "--keys /tmp/shuffledp-keys --manifest /tmp/round-1.json"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--broker",
        default=DEFAULT_BROKER,
        metavar="URL",
        help="MQTT broker URL, or URL,URL,...: several spread the client processes over "
        "them (clients-j on URL number j mod B), hop 0 connects to all, the later stages to "
        "the first (docs/deployment.md)",
    )
    p.add_argument(
        "--keys",
        required=True,
        type=Path,
        metavar="DIR",
        help="key directory made by `shuffledp keys init`",
    )
    _add_round_identity(p)
    _add_connection_options(p)


def _add_round_identity(p: argparse.ArgumentParser) -> None:
    """--manifest, and --prefix and --round (which must agree with it)."""
    p.add_argument(
        "--manifest",
        required=True,
        type=Path,
        metavar="FILE",
        help="the round's signed manifest (`shuffledp round init`): k, eps0, the expected "
        "reports, deadlines, prefix and rounds come from it; it must verify with DIR's "
        "coordinator key and name this stage's own keys",
    )
    p.add_argument(
        "--prefix",
        metavar="PREFIX",
        help="topic prefix (from the manifest; refused if it contradicts it)",
    )
    p.add_argument(
        "--round",
        type=integer(0, MAX_ROUND_ID),
        metavar="ID",
        help="round id, one of the manifest's (default: the manifest's only round)",
    )


def _add_connection_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-auth",
        action="store_true",
        help="connect anonymously (an open broker); default: log in with this component's "
        "account from DIR/access/<identity>.password (`shuffledp keys init` writes them)",
    )
    p.add_argument(
        "--tls-ca",
        type=Path,
        metavar="FILE",
        help="with --broker mqtts://HOST[:PORT]: trust only the CA certificates (PEM) in FILE, "
        "e.g. DIR/tls/ca.pem from `shuffledp keys init --tls` (default: the system's trust "
        "store); an error with a plain mqtt:// broker",
    )
    p.add_argument(
        "--reconnect",
        type=non_negative,
        metavar="SECONDS",
        help="keep a persistent MQTT session and, if the connection is lost (a restarted "
        "Mosquitto with persistence, a network fault), reconnect for up to SECONDS "
        f"(default: {RECONNECT_SECONDS:g})",
    )
    p.add_argument(
        "--no-reconnect",
        action="store_true",
        help="end on the first lost connection (exit 1) instead of reconnecting",
    )
    p.add_argument(
        "--accept-loss",
        action="store_true",
        help="go on with fewer reports than this stage should have (publish a smaller round "
        "knowingly; the report says so); default: refuse the round, exit status 5, one line "
        "saying how many reports were lost and where",
    )
    p.add_argument("--verbose", action="store_true", help="log debug detail on stderr")


def add_parsers(subparsers: Any) -> None:
    _add_hop(subparsers)
    _add_analyzer(subparsers)
    _add_clients(subparsers)


def _add_hop(subparsers: Any) -> None:
    hop = add_command(
        subparsers,
        "hop",
        help="run one shuffler hop for one round",
        description="Collect the round's batch on this hop's ingress topic, drop malformed and "
        "duplicate messages by reason, peel this hop's layer, permute uniformly (OS CSPRNG unless "
        "--seed), forward to the next hop or the analyzer. Counts are logged on stderr.",
        examples=[
            _KEYS_EXAMPLE,
            _ROUND_EXAMPLE,
            f"shuffledp hop {_RUN} --index 0",
            f"shuffledp hop --broker mqtt://127.0.0.1:1883 {_RUN} --index 2 "
            "--state-dir /tmp/shuffledp-hop-2",
        ],
    )
    _common(hop)
    hop.add_argument(
        "--index",
        type=integer(0, MAX_HOPS - 1),
        required=True,
        metavar="I",
        help="this hop's index, 0..H-1",
    )
    hop.add_argument(
        "--expected",
        type=integer(1),
        metavar="COUNT",
        help="the round's batch size (from the manifest; refused if it contradicts it)",
    )
    hop.add_argument(
        "--min-batch",
        type=integer(1),
        metavar="COUNT",
        help="refuse to release fewer messages than this (from the manifest; refused if it "
        "contradicts it)",
    )
    hop.add_argument(
        "--deadline",
        type=positive,
        metavar="SECONDS",
        help="hop 0: seconds after ready at which the batch closes if not full; later hops: "
        "seconds after the upstream's first frame (from the manifest; refused if it "
        "contradicts it)",
    )
    hop.add_argument(
        "--seed", type=integer(0), metavar="SEED", help="seeded permutation (simulations only)"
    )
    hop.add_argument(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help="keep a journal of this round in DIR (created 0700) and acknowledge messages only "
        "once journaled, with a persistent MQTT session: a hop killed mid-round and restarted "
        "with the same arguments loses and duplicates nothing, and a broker restart is waited "
        f"out for up to {RECONNECT_SECONDS:g} s (needs Mosquitto)",
    )
    _add_hop_role(hop)
    hop.set_defaults(func=_run_hop)


def _add_hop_role(hop: argparse.ArgumentParser) -> None:
    """--role and --worker: one process of a hop that is several (docs/hop-workers.md)."""
    hop.add_argument(
        "--role",
        choices=("peeler", "mixer"),
        help="with a manifest whose hops are W processes (hop_workers, docs/hop-workers.md): "
        "this process is one of the hop's W peelers (with --worker P) or its mixer",
    )
    hop.add_argument(
        "--worker",
        type=integer(0, 255),
        metavar="P",
        help="with --role peeler: this peeler's number, 0..W-1",
    )


def _add_analyzer(subparsers: Any) -> None:
    analyzer = add_command(
        subparsers,
        "analyzer",
        help="run the analyzer for one round and print its report (a summary; --json)",
        description="Peel the last layer, validate, count, estimate (shuffle+INV, IBU) and "
        "publish the report with the accountant's guarantee for the reports actually received.",
        examples=[
            _KEYS_EXAMPLE,
            _ROUND_EXAMPLE,
            f"shuffledp analyzer {_RUN}",
            f"shuffledp analyzer {_RUN} --eps 1 --out /tmp/shuffledp-report.json",
        ],
    )
    _common(analyzer)
    _add_manifest_echoes(analyzer)
    analyzer.add_argument(
        "--expected",
        type=integer(1),
        metavar="COUNT",
        help="clients expected (from the manifest; refused if it contradicts it)",
    )
    target = analyzer.add_mutually_exclusive_group()
    target.add_argument(
        "--delta",
        type=probability,
        metavar="DELTA",
        help="target delta (from the manifest; refused if it contradicts it)",
    )
    target.add_argument(
        "--eps",
        type=non_negative,
        metavar="EPS",
        help="report the delta bracket at this eps instead",
    )
    analyzer.add_argument(
        "--deadline",
        type=positive,
        metavar="SECONDS",
        help="seconds after the last hop's first frame to wait for the rest of its batch (from "
        "the manifest; refused if it contradicts it)",
    )
    _add_report_outputs(analyzer)
    analyzer.add_argument(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help="keep a journal of the frames received in DIR (created 0700) and acknowledge them "
        "only once journaled, with a persistent MQTT session: an analyzer killed mid-round and "
        "restarted with the same arguments counts every report exactly once, and a broker "
        f"restart is waited out for up to {RECONNECT_SECONDS:g} s (needs Mosquitto)",
    )
    analyzer.set_defaults(func=_run_analyzer)


def _add_report_outputs(analyzer: argparse.ArgumentParser) -> None:
    """--out FILE and --json: where the report goes besides the round's report topic."""
    analyzer.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="also write the report (JSON) to FILE (checked writable before the round starts)",
    )
    analyzer.add_argument(
        "--json",
        action="store_true",
        help="print the report as one JSON object (docs/report-schema.md) instead of a summary",
    )


def _add_clients(subparsers: Any) -> None:
    clients = add_command(
        subparsers,
        "clients",
        help="host many simulated clients: one k-RR report each",
        description="Each simulated client applies k-RR (OS CSPRNG unless --seed), encodes a "
        "fixed-size record, onion-encrypts it to the hops and the analyzer, and publishes it once "
        "to hop 0, after hop 0 announced ready.",
        examples=[
            _KEYS_EXAMPLE,
            _ROUND_EXAMPLE,
            f"shuffledp clients {_RUN} --values synthetic",
            f"shuffledp clients {_RUN} --values values.txt --name clients-1",
        ],
    )
    _common(clients)
    _add_manifest_echoes(clients)
    clients.add_argument(
        "--values",
        required=True,
        metavar="FILE|synthetic",
        help="a file with one value in [0, K) per line, or 'synthetic'",
    )
    clients.add_argument(
        "--count",
        type=integer(0),
        metavar="COUNT",
        help="number of clients (default: every value of the file)",
    )
    clients.add_argument(
        "--name", default="clients-0", metavar="NAME", help="this process's stage name"
    )
    _add_simulation_only(clients)
    clients.add_argument(
        "--max-in-flight",
        type=integer(1, 65535),
        default=128,
        metavar="COUNT",
        help="publishes awaiting acknowledgement",
    )
    clients.add_argument(
        "--ready-timeout",
        type=positive,
        default=60.0,
        metavar="SECONDS",
        help="seconds to wait for hop 0",
    )
    clients.set_defaults(func=_run_clients)


def _add_manifest_echoes(parser: argparse.ArgumentParser) -> None:
    """--k and --eps0: the manifest's; accepted when they repeat it, refused otherwise."""
    parser.add_argument(
        "--k",
        type=integer(2, MAX_K),
        metavar="K",
        help="number of values (from the manifest; refused if it contradicts it)",
    )
    parser.add_argument(
        "--eps0",
        type=positive,
        metavar="EPS0",
        help="the clients' k-RR epsilon (from the manifest; refused if it contradicts it)",
    )


def _add_simulation_only(clients: argparse.ArgumentParser) -> None:
    """Options of `clients` for simulations: a seed, a rate, hostile messages."""
    clients.add_argument(
        "--seed", type=integer(0), metavar="SEED", help="seeded k-RR (simulations only)"
    )
    clients.add_argument(
        "--rate",
        type=positive,
        metavar="RATE",
        help="simulations only: send at most RATE reports per second (default: as fast as "
        "possible)",
    )
    clients.add_argument(
        "--chaos",
        type=integer(0),
        default=0,
        metavar="COUNT",
        help="simulations only: also inject COUNT hostile messages (truncated, replayed, "
        "corrupted, second reports, another round's reports) before this process's last report; "
        "each must be rejected by hop 0 under its known reason (needs client authentication)",
    )


def read_values(path: Path, k: int) -> npt.NDArray[np.int64]:
    """The values of a file with one integer in [0, k) per line ('#' starts a comment; blank
    lines are skipped). Raises InvalidParameterError naming the file, the line and the rule for
    the first bad line, or if the file cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidParameterError(f"{path}: cannot read the values file: {exc}") from exc
    values: list[int] = []
    # Lines end at '\n' only (and a '\r' before it): str.splitlines would also break at
    # U+2028, U+0085, form feeds and more, cutting comments short and shifting line numbers.
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.removesuffix("\r")
        content = line.split("#", 1)[0].strip()
        if not content:
            continue
        try:
            value = int(content)
        except ValueError:
            raise InvalidParameterError(
                f"{path}:{number}: a value must be an integer, got {content!r}"
            ) from None
        if not 0 <= value < k:
            raise InvalidParameterError(
                f"{path}:{number}: a value must be in [0, k) = [0, {k}), got {value}"
            )
        values.append(value)
    return np.asarray(values, dtype=np.int64)


def _client_process_index(name: str) -> int:
    """j of a client process named clients-<j> (its broker identity and its client keys)."""
    match = re.fullmatch(r"clients-(0|[1-9][0-9]{0,4})", name)
    if match is None:
        raise InvalidParameterError(
            f"--name must be clients-<j> (the process's broker account, client keys and its "
            f"enrolment in the manifest), got {name!r}"
        )
    return int(match.group(1))


def _check_paths(args: argparse.Namespace) -> None:
    """The files named on the command line, before any key is loaded or broker contacted."""
    args.brokers = broker_urls(args.broker)
    if args.tls_ca is not None:
        check_input_file("--tls-ca", args.tls_ca)
        if not parse_broker_address(args.brokers[0]).tls:
            raise InvalidParameterError(
                f"--tls-ca needs an mqtts:// broker (--broker mqtts://HOST[:PORT]), got --broker "
                f"{args.broker!r}"
            )
    if getattr(args, "state_dir", None) is not None:
        check_output_dir("--state-dir", args.state_dir)
    if getattr(args, "out", None) is not None:
        check_output_file("--out", args.out)


def _run_hop(args: argparse.Namespace) -> int:
    from shuffledp.shuffler.service import run_hop

    _check_paths(args)
    directory = load_public_directory(args.keys)
    if args.index >= directory.n_hops:
        raise InvalidParameterError(
            f"--index must be in [0, {directory.n_hops - 1}] (the hops of --keys {args.keys}), "
            f"got {args.index}"
        )
    manifest = apply_manifest(args, "hop")
    key = load_hop_key(args.keys, args.index)
    signing_key = _require_own_keys(args, manifest, f"hop-{args.index}", key)
    settings = _hop_settings(args, manifest, signing_key)
    if _check_role(args, manifest):
        from shuffledp.cli.hop_workers import run_hop_worker

        return run_hop_worker(args, manifest, settings, key)
    rng = default_source(args.seed)
    username, password = broker_credentials(args, settings.stage)
    # Hop 0 checks one authentic report per enrolled client: exactly the manifest's enrolment.
    verifier = (
        load_client_verifier(args.keys, args.round, roster=ClientRoster.exact(manifest.clients))
        if args.index == 0 and manifest.client_auth
        else None
    )

    async def main() -> int:
        journaled = args.state_dir is not None
        secret = id_secret(username, password, key)
        session = session_options(args, settings.stage, secret, persistent=journaled)

        def connect(url: str) -> MqttTransport:
            return MqttTransport(
                url,
                will_topic=will_topic(args, settings.stage),
                username=username,
                password=password,
                tls_ca=args.tls_ca,
                manual_ack=journaled,
                exclusive=True,  # a second process as this hop stops (IdentityInUseError)
                **session,
            )

        async with hop_connection(args.brokers, args.index, settings.egress, connect) as t:
            result = await run_hop(
                t, settings, key, rng=rng, verifier=verifier, state_dir=args.state_dir
            )
        return hop_exit_status(result)

    return run_component(args, main())


def _check_role(args: argparse.Namespace, manifest: Manifest) -> bool:
    """True iff this process is a peeler or mixer of a hop of several processes; the flags
    must agree with the manifest's ``hop_workers`` (InvalidParameterError otherwise)."""
    workers = manifest.hop_workers
    if workers == 1:
        if args.role is not None or args.worker is not None:
            raise InvalidParameterError(
                f"--role and --worker need a manifest whose hops are several processes "
                f"(hop_workers > 1), {args.manifest} has hop_workers = 1"
            )
        return False
    if args.role is None:
        raise InvalidParameterError(
            f"the manifest makes each hop {workers} peelers and a mixer: give --role peeler "
            "--worker P or --role mixer"
        )
    if (args.role == "peeler") != (args.worker is not None):
        raise InvalidParameterError("--worker P goes with --role peeler, and only with it")
    if args.worker is not None and args.worker >= workers:
        raise InvalidParameterError(
            f"--worker must be in [0, {workers - 1}] (the manifest's hop_workers), got "
            f"{args.worker}"
        )
    if len(args.brokers) > 1:
        raise InvalidParameterError(
            f"--role {args.role} takes one --broker, got {len(args.brokers)}: a hop of several "
            "processes does not fan in from several brokers yet (docs/hop-workers.md)"
        )
    return True


def _require_own_keys(
    args: argparse.Namespace, manifest: Manifest, stage: str, key: Any
) -> SigningKey:
    """This stage's signing key, once its private key and signing key (from --keys) are the
    ones the manifest names for ``stage`` (ManifestError otherwise)."""
    signing = load_signing_key(args.keys, stage)
    require_own_keys(manifest, stage, bytes(key.public_key), bytes(signing.verify_key))
    return signing


def _upstream_verify_key(manifest: Manifest, stage_index: int) -> VerifyKey | None:
    """The verify key of the hop whose frames stage ``stage_index`` takes (None for hop 0)."""
    return None if stage_index == 0 else manifest.hops[stage_index - 1].verify_key


def _hop_settings(
    args: argparse.Namespace, manifest: Manifest, signing_key: SigningKey
) -> HopSettings:
    """The hop's settings (after :func:`apply_manifest`: the manifest's values and keys)."""
    from shuffledp.shuffler.service import HopSettings

    return HopSettings(
        prefix=args.prefix,
        round_id=args.round,
        hop_index=args.index,
        n_hops=manifest.n_hops,
        expected_size=args.expected,
        min_batch=args.min_batch,
        deadline=args.deadline,
        accept_loss=args.accept_loss,
        manifest_digest=manifest.digest,
        signing_key=signing_key,
        upstream_verify_key=_upstream_verify_key(manifest, args.index),
    )


def _run_analyzer(args: argparse.Namespace) -> int:
    from shuffledp.analyzer.service import AnalyzerSettings, run_analyzer

    _check_paths(args)
    directory = load_public_directory(args.keys)
    manifest = apply_manifest(args, "analyzer")
    key = load_analyzer_key(args.keys)
    _require_own_keys(args, manifest, "analyzer", key)
    settings = AnalyzerSettings(
        prefix=args.prefix,
        round_id=args.round,
        k=args.k,
        eps0=args.eps0,
        n_hops=directory.n_hops,
        n_expected=args.expected,
        deadline=args.deadline,
        target_delta=args.delta,
        eps=args.eps,
        colluders=manifest.colluders,
        accept_loss=args.accept_loss,
        manifest_digest=manifest.digest,
        hop_verify_keys=tuple(hop.verify_key for hop in manifest.hops),
    )

    username, password = broker_credentials(args, "analyzer")

    async def main() -> int:
        journaled = args.state_dir is not None
        secret = id_secret(username, password, key)
        async with MqttTransport(
            args.brokers[0],
            will_topic=will_topic(args, "analyzer"),
            username=username,
            password=password,
            tls_ca=args.tls_ca,
            manual_ack=journaled,
            exclusive=True,  # a second analyzer stops (IdentityInUseError)
            **session_options(args, "analyzer", secret, persistent=journaled),
        ) as t:
            report = await run_analyzer(t, settings, key, state_dir=args.state_dir)
        text = json.dumps(report, allow_nan=False)
        if args.out is not None:  # checked writable before the round (_check_paths)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text + "\n", encoding="utf-8")
        print(text if args.json else _report_text(report), flush=True)
        return _analyzer_exit_status(report)

    return run_component(args, main())


def _analyzer_exit_status(report: dict[str, Any]) -> int:
    """EXIT_LOST if the round was refused for its loss's line, EXIT_REFUSED for any other
    refusal (a chain of statements that does not verify, a hop that refused), else 0; the line
    on stderr."""
    error, delivery = report.get("error"), report.get("delivery") or {}
    if error is None:
        return 0
    message = delivery.get("message")
    if message and error == f"the round was refused: {message}":
        print(f"shuffledp analyzer: error: {message}", file=sys.stderr)
        return EXIT_LOST
    print(f"shuffledp analyzer: {error}", file=sys.stderr)
    return EXIT_REFUSED


def _report_text(report: dict[str, Any]) -> str:
    from shuffledp.analyzer.records import PublishedReport
    from shuffledp.cli.report_text import format_published_report

    return format_published_report(PublishedReport.from_json(report))


def _run_clients(args: argparse.Namespace) -> int:
    _check_paths(args)
    directory = load_public_directory(args.keys)
    manifest = apply_manifest(args, "clients")
    process = _client_process_index(args.name)
    if process >= len(manifest.clients):
        raise ManifestError(
            f"--name {args.name} is not one of the manifest's {len(manifest.clients)} client "
            f"processes (clients-0..clients-{len(manifest.clients) - 1}; {args.manifest})"
        )
    _refuse_count(args, manifest.clients[process])
    args.count = manifest.clients[process]
    rng = default_source(args.seed)
    values = _client_values(args, rng)
    settings = _client_settings(args, manifest)
    username, password = broker_credentials(args, args.name)
    credentials = load_process_credentials(args.keys, process) if manifest.client_auth else None

    async def main() -> int:
        async with MqttTransport(
            client_broker(args.brokers, process),
            # No will: a client process retains no status (retains_status), so there is
            # nothing to clear, and the broker refuses a client account's retained will.
            will_topic=None,
            **session_options(args, args.name, id_secret(username, password)),
            username=username,
            password=password,
            tls_ca=args.tls_ca,
        ) as t:
            await _send_reports(t, args, settings, values, directory, rng, credentials)
        return 0

    return run_component(args, main())


def _refuse_count(args: argparse.Namespace, enrolled: int) -> None:
    """--count, if given, must be the manifest's number of clients of this process."""
    if args.count is not None and args.count != enrolled:
        raise ManifestError(
            f"--count {args.count} contradicts the manifest's clients[{args.name[8:]}] = "
            f"{enrolled} ({args.manifest}): this process hosts exactly the clients the manifest "
            f"enrols; drop --count"
        )


def _client_values(args: argparse.Namespace, rng: RandomSource) -> npt.NDArray[np.int64]:
    """The true values to report, exactly ``args.count`` of them (the manifest's clients of
    this process): --values synthetic, or the first ``args.count`` of a file (which must hold
    that many: InvalidParameterError naming the file otherwise)."""
    from shuffledp.simulations.data.datasets import synthetic_values

    if args.values == "synthetic":
        return synthetic_values(args.count, args.k, rng)
    values = read_values(check_input_file("--values", Path(args.values)), args.k)
    if values.size < args.count:
        raise InvalidParameterError(
            f"--values {args.values} must hold at least the {args.count} values of this "
            f"process's clients (the manifest's clients[{args.name[8:]}]), it holds {values.size}"
        )
    return values[: args.count]


def _client_settings(args: argparse.Namespace, manifest: Manifest) -> ClientSettings:
    from shuffledp.clients.service import ClientSettings

    return ClientSettings(
        manifest_digest=manifest.digest,
        prefix=args.prefix,
        round_id=args.round,
        k=args.k,
        eps0=args.eps0,
        name=args.name,
        max_in_flight=args.max_in_flight,
        ready_timeout=args.ready_timeout,
        accept_loss=args.accept_loss,
        peeler=(
            _client_process_index(args.name) % manifest.hop_workers
            if manifest.hop_workers > 1
            else None
        ),
    )


async def _send_reports(
    transport: MqttTransport,
    args: argparse.Namespace,
    settings: ClientSettings,
    values: npt.NDArray[np.int64],
    directory: PublicDirectory,
    rng: RandomSource,
    credentials: ProcessCredentials | None,
) -> None:
    """This process's clients' reports, through the chaos wrapper with --chaos (simulations
    only: the client with its publisher wrapped)."""
    if args.chaos:
        from shuffledp.simulations.pipeline.chaos import run_chaos_clients

        await run_chaos_clients(
            transport,
            settings,
            values,
            hop_public_keys=directory.hop_keys,
            analyzer_public_key=directory.analyzer_key,
            chaos=args.chaos,
            rng=rng,
            credentials=credentials,
            rate=args.rate,
        )
        return
    from shuffledp.clients.service import run_clients

    await run_clients(
        transport,
        settings,
        values,
        hop_public_keys=directory.hop_keys,
        analyzer_public_key=directory.analyzer_key,
        rng=rng,
        credentials=credentials,
        rate=args.rate,
    )
