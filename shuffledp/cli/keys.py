"""`shuffledp keys`: manage the key directory of a deployment (`keys init DIR --hops H`, with
`--tls` also a private CA and the broker's TLS certificate, :mod:`shuffledp.security.tls`).

Output names files, their modes and public key fingerprints; never private key material.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shuffledp.cli.argtypes import integer
from shuffledp.cli.help import add_command
from shuffledp.cli.paths import check_output_dir
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.onion import public_key_to_bytes
from shuffledp.security.access import (
    EVEN_SHARE,
    MAX_CLIENT_PROCESSES,
    access_directory,
    init_access,
)
from shuffledp.security.keys import (
    ANALYZER_STAGE,
    MAX_HOPS,
    PublicDirectory,
    fingerprint,
    init_key_directory,
    private_key_path,
    public_file_path,
    stage_names,
)
from shuffledp.security.tls import (
    DEFAULT_TLS_HOSTS,
    TlsFiles,
    check_tls_absent,
    init_tls,
    tls_hosts,
    write_mosquitto_tls_config,
)

DEFAULT_HOPS = 3
DEFAULT_CLIENT_PROCESSES = 1
"""One client process by default: with the even-share enrolment it may host the whole round
(each of C processes gets ceil(--expected / C) identities)."""


def add_parser(subparsers: Any) -> None:
    """Register `keys` (with its required nested subcommand `init`) on ``subparsers``."""
    p = add_command(
        subparsers,
        "keys",
        help="create and manage the key directory of a deployment",
        description="Key directory of a deployment: public.json (public keys of every hop and "
        "of the analyzer, for clients) and one private key file per stage (mode 0600).",
        examples=[
            "shuffledp keys init /tmp/shuffledp-keys",
            "shuffledp keys init /tmp/shuffledp-keys --hops 5 --tls",
        ],
    )
    keys_sub = p.add_subparsers(dest="keys_command", metavar="COMMAND", required=True)
    _add_init(keys_sub)


def _add_init(keys_sub: Any) -> None:
    init = add_command(
        keys_sub,
        "init",
        help="create fresh keys for H hops and the analyzer",
        description="Create DIR (mode 0700) if missing and write fresh X25519 keys from the OS "
        "CSPRNG: hop-0.key .. hop-{H-1}.key and analyzer.key (mode 0600), then public.json "
        "(mode 0644). Refuses if any of these files exists, unless --overwrite. Keep DIR "
        "outside a source tree (keys/ is in the repository's .gitignore all the same).",
        examples=[
            "shuffledp keys init /tmp/shuffledp-keys",
            "shuffledp keys init /tmp/shuffledp-keys --hops 5 --clients 4 --overwrite",
            "shuffledp keys init /tmp/shuffledp-keys --tls --tls-host broker.example.org",
        ],
    )
    _add_key_arguments(init)
    _add_tls_arguments(init)
    init.add_argument("--json", action="store_true", help="print one JSON object")
    init.set_defaults(func=run_init)


def _add_key_arguments(init: argparse.ArgumentParser) -> None:
    """DIR and what goes in it: hops, client processes and their share, the ACL's prefix."""
    init.add_argument("directory", metavar="DIR", help="key directory (created if missing)")
    init.add_argument(
        "--hops",
        type=integer(1, MAX_HOPS),
        default=DEFAULT_HOPS,
        metavar="H",
        help=f"number of hops, 1..{MAX_HOPS}",
    )
    init.add_argument(
        "--clients",
        type=integer(1, MAX_CLIENT_PROCESSES),
        default=DEFAULT_CLIENT_PROCESSES,
        metavar="COUNT",
        help="client processes, each with its own broker account clients-0..clients-{COUNT-1}",
    )
    init.add_argument(
        "--hop-workers",
        type=integer(1, 256),
        default=1,
        metavar="W",
        help="also a broker account hop-I-pP for each of W peelers of every hop "
        "(docs/hop-workers.md); 1: one process per hop",
    )
    init.add_argument(
        "--clients-per-process",
        type=integer(1),
        default=EVEN_SHARE,
        metavar="COUNT",
        help="recorded in access/access.json only: hop 0 enrols exactly the clients each "
        "round's manifest names per process (`shuffledp round init`), whatever this says "
        "(default: an even share)",
    )
    init.add_argument(
        "--prefix",
        default="shuffledp",
        metavar="PREFIX",
        help="topic prefix the broker ACL is written for",
    )
    init.add_argument(
        "--overwrite", action="store_true", help="replace existing keys (old keys are lost)"
    )


def _add_tls_arguments(init: argparse.ArgumentParser) -> None:
    """--tls and --tls-host: a private CA and the broker's certificate."""
    init.add_argument(
        "--tls",
        action="store_true",
        help="also make a private CA and a broker certificate (DIR/tls/: ca.pem, server.pem "
        "0644; ca.key, server.key 0600) and DIR/access/mosquitto-tls.conf, a Mosquitto "
        "configuration with one TLS listener on port 8883; components then connect with "
        "--broker mqtts://HOST:8883 --tls-ca DIR/tls/ca.pem",
    )
    init.add_argument(
        "--tls-host",
        action="append",
        metavar="HOST",
        help="a host name or IP address the broker certificate is valid for (repeat for "
        f"several; default: {' and '.join(DEFAULT_TLS_HOSTS)}); needs --tls",
    )


@dataclass(frozen=True)
class _Made:
    """What `keys init` wrote, for its summary."""

    directory: Path
    published: PublicDirectory
    accounts: list[str]
    prefix: str
    tls: TlsFiles | None
    tls_config: Path | None

    @property
    def access(self) -> Path:
        return access_directory(self.directory)

    def private_paths(self) -> list[tuple[str, Path]]:
        stages = stage_names(self.published.n_hops)
        return [(stage, private_key_path(self.directory, stage)) for stage in stages]


def run_init(args: argparse.Namespace) -> int:
    """Initialize the directory and print a summary; errors propagate (KeyDirectoryError /
    InvalidParameterError) for main() to report as one stderr line with exit code 2."""
    directory = Path(os.path.abspath(args.directory))
    tls_names = None
    if args.tls_host is not None and not args.tls:
        raise InvalidParameterError(
            "--tls-host needs --tls (it names the broker certificate's hosts)"
        )
    check_output_dir("DIR", directory)
    if args.tls:  # checked before any key is written
        tls_names = tls_hosts(args.tls_host)
        check_tls_absent(directory, overwrite=args.overwrite)
    published = init_key_directory(directory, hops=args.hops, overwrite=args.overwrite)
    accounts = init_access(
        directory,
        hops=args.hops,
        client_processes=args.clients,
        clients_per_process=args.clients_per_process,
        prefix=args.prefix,
        overwrite=args.overwrite,
        hop_workers=args.hop_workers,
    )
    tls = (
        None
        if tls_names is None
        else init_tls(directory, hosts=tls_names, overwrite=args.overwrite)
    )
    tls_config = (
        None if tls is None else write_mosquitto_tls_config(directory, overwrite=args.overwrite)
    )
    made = _Made(directory, published, list(accounts), args.prefix, tls, tls_config)
    print(json.dumps(_summary(made)) if args.json else "\n".join(_table(made)))
    if not args.json:
        print(
            f"client enrolment: per round, by its signed manifest (`shuffledp round init "
            f"--keys {directory} ...`): exactly the clients each of the {args.clients} client "
            f"processes hosts; coordinator.sign signs the manifests"
        )
    return 0


def _summary(made: _Made) -> dict[str, Any]:
    """The --json summary: paths, public keys and identities, never private material."""
    published = made.published
    summary: dict[str, Any] = {
        "directory": str(made.directory),
        "n_hops": published.n_hops,
        "public": str(public_file_path(made.directory)),
        "private": [str(path) for _, path in made.private_paths()],
        "hops": [public_key_to_bytes(key).hex() for key in published.hop_keys],
        "analyzer": public_key_to_bytes(published.analyzer_key).hex(),
        "access": str(made.access),
        "broker_identities": made.accounts,
        "prefix": made.prefix,
    }
    if made.tls is not None:
        summary["tls"] = _tls_summary(made.tls, made.tls_config)
    return summary


def _table(made: _Made) -> list[str]:
    """The text summary: each file with its mode and what it is for."""
    public_path = public_file_path(made.directory)
    rows = [(public_path.name, _mode(public_path), "public keys: give to clients and hops")]
    for stage, path in made.private_paths():
        owner = "the analyzer" if stage == ANALYZER_STAGE else stage.replace("-", " ")
        key = made.published.stage_key(stage)
        rows.append((path.name, _mode(path), f"private key of {owner}, public {fingerprint(key)}"))
    width = max(len(name) for name, _, _ in rows)
    lines = [f"key directory {made.directory}: {made.published.n_hops} hops"]
    lines += [f"  {name.ljust(width)}  {mode}  {what}" for name, mode, what in rows]
    lines.append("each .key file belongs on its stage's machine only; public.json may be shared")
    lines.append(
        f"broker accounts in {made.access} for prefix {made.prefix!r}: "
        f"{', '.join(made.accounts)}; each <identity>.password belongs on that component's "
        f"machine only; passwd and acl are the broker's (mosquitto -c "
        f"{made.access / 'mosquitto.conf'}, or shuffledp broker --keys {made.directory})"
    )
    tls = made.tls
    if tls is not None:
        lines.append(f"TLS files in {tls.ca_cert.parent}:")
        for path, what in (
            (tls.ca_cert, f"CA certificate, SHA-256 {tls.ca_fingerprint}: give to everyone"),
            (tls.ca_key, "CA private key: keep it offline"),
            (tls.server_cert, f"broker certificate for {', '.join(tls.hosts)}"),
            (tls.server_key, "broker private key: the broker's machine only"),
        ):
            lines.append(f"  {path.name.ljust(10)}  {_mode(path)}  {what}")
        lines.append(
            f"broker over TLS: mosquitto -c {made.tls_config} (port 8883); components: --broker "
            f"mqtts://HOST:8883 --tls-ca {tls.ca_cert}"
        )
    return lines


def _tls_summary(tls: TlsFiles, config: Path | None) -> dict[str, Any]:
    return {
        "directory": str(tls.ca_cert.parent),
        "ca_cert": str(tls.ca_cert),
        "ca_key": str(tls.ca_key),
        "server_cert": str(tls.server_cert),
        "server_key": str(tls.server_key),
        "hosts": list(tls.hosts),
        "ca_sha256": tls.ca_fingerprint,
        "mosquitto_conf": str(config),
    }


def _mode(path: Path) -> str:
    return f"{stat.S_IMODE(path.stat().st_mode):04o}"
