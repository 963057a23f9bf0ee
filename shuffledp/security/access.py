"""Broker access control: one account per component, and topic ACLs, for both brokers.

Why: the onion protects what a report says, not who may talk to the broker. Without accounts
any process that reaches the broker could publish into a hop's output topic (skipping the
shuffle) or read a hop's ingress. With them, every component connects under its own identity
and may touch only its own topics; everything else is denied.

``init_access(DIR, hops=H, client_processes=C, prefix=P)`` (run by ``shuffledp keys init``)
writes ``DIR/access/``:

- ``<identity>.password`` (mode 0600), one per identity: ``hop-0`` .. ``hop-{H-1}``,
  ``analyzer``, ``monitor`` (the launcher/observer) and ``clients-0`` .. ``clients-{C-1}`` (one
  per client *process*): 43 characters, the URL-safe base64 of 32 bytes from the OS CSPRNG
  (256 bits: guessing is hopeless, so the hash below needs no expensive key stretching). Each
  belongs on its component's machine only.
- ``passwd`` (0600): the broker's password file in Mosquitto 2.0's format,
  ``identity:$7$101$<base64 12-byte salt>$<base64 PBKDF2-HMAC-SHA512(password, salt, 101, 64)>``
  (what ``mosquitto_passwd`` writes; checked against it); the embedded broker reads the same file.
- ``acl`` (0600): the Mosquitto ACL file (``user NAME`` then ``topic read|write FILTER``
  lines); the embedded broker reads the same file. Rules, with ``R = P/round/+``:
  clients-j write ``R/hop/0`` and their own ``R/status/clients-j``, ``R/progress/clients-j``,
  ``R/claim/clients-j``, and read ``R/status/hop-0`` and their own ``R/receipt/clients-j``;
  hop-i reads ``R/hop/i`` and its downstream's status, writes its downstream's ingress
  (``R/hop/{i+1}`` or ``R/analyzer``) and its own status and progress, and hop-0 also reads
  ``R/claim/+`` and writes ``R/receipt/+`` (end-to-end delivery, protocol/receipts.py); the
  analyzer reads ``R/analyzer`` and ``R/report`` (a round's report is written once: it looks
  before publishing), writes ``R/report`` and its own status and progress, and is the only
  identity that may write ``R/report``; the monitor reads ``R/status/+``, ``R/progress/+`` and
  ``R/report`` and writes nothing. Nothing else is allowed.
- ``mosquitto.conf`` (0644): a Mosquitto 2.x configuration on 127.0.0.1:1883 with
  ``allow_anonymous false`` and the two files above (``mosquitto -c DIR/access/mosquitto.conf``).
- ``client-master.key`` (0600): 64 hex characters, the master key of client authentication
  (protocol/client_auth.py), 32 bytes from the OS CSPRNG. It belongs on hop 0's machine only:
  hop 0 derives every client's key from it to check one report per enrolled client per round.
- ``clients-<j>.clientkey`` (0600), one per client process: 64 hex characters, that process's
  key (``process_key(master, j)``), from which it derives the keys of the clients it hosts.
- ``access.json`` (0644): ``{"format": "shuffledp-access", "version": 1, "prefix", "n_hops",
  "client_processes", "clients_per_process", "identities"}``; ``clients_per_process`` is the
  enrolment: hop 0 accepts client ids ``j << 32 | i`` with ``j < client_processes`` and
  ``i < clients_per_process`` only; ``null`` (the default, :data:`EVEN_SHARE`) makes it
  ceil(hop 0's --expected / client_processes), each process's share of the round.

Every problem raises :class:`AccessError` naming the file and the rule; no message contains a
password.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.client_auth import (
    MASTER_KEY_SIZE,
    ClientRoster,
    ClientVerifier,
    ProcessCredentials,
    process_key,
)
from shuffledp.protocol.topics import validate_prefix
from shuffledp.security.broker_limits import (
    STAGE_PACKET_BYTES,
    client_payload_bytes,
    mosquitto_limit_settings,
)
from shuffledp.security.keys import (
    DIRECTORY_MODE,
    MAX_HOPS,
    PRIVATE_FILE_MODE,
    PUBLIC_FILE_MODE,
    KeyDirectoryError,
    _read_private_file,
    _write_file,
)
from shuffledp.security.mosquitto_bounds import (
    LIBRARY,
    PluginBuild,
    bounds_settings,
    build_bounds_plugin,
)
from shuffledp.validation import require_int

__all__ = [
    "ACCESS_DIR",
    "MONITOR",
    "AccessError",
    "AccessRules",
    "AccessSettings",
    "access_directory",
    "access_rules",
    "hash_password",
    "identities",
    "init_access",
    "load_access_settings",
    "load_client_verifier",
    "load_password",
    "load_process_credentials",
    "parse_acl_file",
    "parse_password_file",
    "topic_matches",
    "verify_password",
]

ACCESS_DIR = "access"
MONITOR = "monitor"
FORMAT = "shuffledp-access"
VERSION = 1
MAX_CLIENT_PROCESSES = 1024
PBKDF2_ITERATIONS = 101  # Mosquitto 2.0's own default for $7$ hashes
SALT_BYTES = 12
HASH_BYTES = 64
PASSWORD_BYTES = 32
MOSQUITTO_LISTENER_PORT = 1883
EVEN_SHARE = None
"""``clients_per_process`` of an enrolment that is an even share of each round (the default):
hop 0 accepts ceil(--expected / client_processes) clients from each client process, exactly the
clients each process hosts when the round is split evenly (as ``shuffledp simulate`` splits it),
so that one process key cannot fill a round alone. A number instead enrols that many per process
in every round (``keys init --clients-per-process M``)."""
CLIENT_MASTER_FILE = "client-master.key"

_IDENTITY = re.compile(
    r"hop-(0|[1-9][0-9]*)(-p(0|[1-9][0-9]*))?|analyzer|monitor|clients-(0|[1-9][0-9]*)"
)


class AccessError(KeyDirectoryError):
    """A credentials file or rule breaks a rule; the message names the file and the rule."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessRules:
    """The topic filters one identity may read (subscribe to) and write (publish to)."""

    identity: str
    read: tuple[str, ...]
    write: tuple[str, ...]


def identities(n_hops: int, client_processes: int, hop_workers: int = 1) -> tuple[str, ...]:
    """Every broker identity of a deployment, in a fixed order (with ``hop_workers`` W > 1,
    also each hop's peelers ``hop-i-pP``: Mosquitto takes the user name as the client id, so
    each process of a hop has an account of its own)."""
    require_int("n_hops", n_hops, 1, MAX_HOPS)
    require_int("client_processes", client_processes, 1, MAX_CLIENT_PROCESSES)
    require_int("hop_workers", hop_workers, 1, 256)
    peelers = (
        []
        if hop_workers == 1
        else [f"hop-{i}-p{p}" for i in range(n_hops) for p in range(hop_workers)]
    )
    return (
        *(f"hop-{i}" for i in range(n_hops)),
        *peelers,
        "analyzer",
        MONITOR,
        *(f"clients-{j}" for j in range(client_processes)),
    )


def _worker_rules(root: str, n_hops: int, hop_workers: int) -> list[AccessRules]:
    """A hop of W peelers and a mixer (docs/hop-workers.md): the mixer (account ``hop-i``)
    also reads the peelers' sealed frames and statuses and writes ``hop-i-mix``'s status;
    peeler P reads its share (hop 0: its topic and the claims; later hops: the hop's ingress)
    and the mixer's status, writes sealed frames to the mixer and its own status (hop 0's
    peelers also the receipts)."""
    rules: list[AccessRules] = []
    for i in range(n_hops):
        for p in range(hop_workers):
            stage = f"hop-{i}-p{p}"
            ingress = (f"{root}/hop/{i}/w/{p}",) + ((f"{root}/claim/+",) if i == 0 else ())
            rules.append(
                AccessRules(
                    identity=stage,
                    read=(*ingress, f"{root}/status/hop-{i}-mix"),
                    write=(
                        f"{root}/hop/{i}/mix",
                        f"{root}/status/{stage}",
                        f"{root}/progress/{stage}",
                    )
                    + ((f"{root}/receipt/+",) if i == 0 else ()),
                )
            )
    return rules


def _mixer_extras(
    root: str, i: int, n_hops: int, hop_workers: int
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(read, write) the account ``hop-i`` needs beyond a one-process hop's, as a mixer: its
    peelers' frames and statuses; it writes its readiness and the next hop's peeler topics."""
    if hop_workers == 1:
        return (), ()
    statuses = tuple(f"{root}/status/hop-{i}-p{p}" for p in range(hop_workers))
    onward = (f"{root}/hop/{i + 1}/w/+",) if i + 1 < n_hops else ()
    return (f"{root}/hop/{i}/mix", *statuses), (f"{root}/status/hop-{i}-mix", *onward)


def access_rules(
    prefix: str, n_hops: int, client_processes: int, hop_workers: int = 1
) -> tuple[AccessRules, ...]:
    """The ACL of a deployment (module docstring), one entry per identity of ``identities``."""
    root = f"{validate_prefix(prefix)}/round/+"
    rules: list[AccessRules] = []
    for i in range(n_hops):
        stage = f"hop-{i}"
        downstream = "analyzer" if i + 1 == n_hops else f"hop-{i + 1}"
        egress = f"{root}/analyzer" if i + 1 == n_hops else f"{root}/hop/{i + 1}"
        extra_read, extra_write = _mixer_extras(root, i, n_hops, hop_workers)
        rules.append(
            AccessRules(
                identity=stage,
                # hop 0 also reads every client process's claims and writes their receipts
                read=(f"{root}/hop/{i}", f"{root}/status/{downstream}", *extra_read)
                + ((f"{root}/claim/+",) if i == 0 else ()),
                write=(egress, f"{root}/status/{stage}", f"{root}/progress/{stage}", *extra_write)
                + ((f"{root}/receipt/+",) if i == 0 else ()),
            )
        )
    if hop_workers > 1:
        rules.extend(_worker_rules(root, n_hops, hop_workers))
    rules.append(
        AccessRules(
            identity="analyzer",
            # it reads the report topic too: a round's report is written once (analyzer/service.py)
            read=(f"{root}/analyzer", f"{root}/report"),
            write=(f"{root}/report", f"{root}/status/analyzer", f"{root}/progress/analyzer"),
        )
    )
    rules.append(
        AccessRules(
            identity=MONITOR,
            read=(f"{root}/status/+", f"{root}/progress/+", f"{root}/report"),
            write=(),  # read-only: it can neither forge a stage's status nor a report
        )
    )
    for j in range(client_processes):
        stage = f"clients-{j}"
        rules.append(
            AccessRules(
                identity=stage,
                read=(f"{root}/status/hop-0", f"{root}/receipt/{stage}"),
                write=(
                    f"{root}/hop/0",
                    *((f"{root}/hop/0/w/{j % hop_workers}",) if hop_workers > 1 else ()),
                    f"{root}/status/{stage}",
                    f"{root}/progress/{stage}",
                    f"{root}/claim/{stage}",
                ),
            )
        )
    return tuple(rules)


def access_directory(directory: str | os.PathLike[str]) -> Path:
    """``directory/access`` (no file system access)."""
    return Path(directory) / ACCESS_DIR


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """Mosquitto 2.0's ``$7$`` hash of ``password``: ``$7$101$b64(salt)$b64(PBKDF2-HMAC-SHA512(
    password, salt, 101 iterations, 64 bytes))``, standard base64 with padding; a fresh 12-byte
    salt from the OS CSPRNG unless ``salt`` is given."""
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, PBKDF2_ITERATIONS, HASH_BYTES)
    encoded_salt = base64.b64encode(salt).decode()
    return f"$7${PBKDF2_ITERATIONS}${encoded_salt}${base64.b64encode(digest).decode()}"


def verify_password(password: str, hashed: str) -> bool:
    """True iff ``hashed`` is a ``$7$`` hash of ``password`` (constant-time comparison); False
    for a malformed hash, never raises."""
    parts = hashed.split("$")
    if len(parts) != 5 or parts[0] != "" or parts[1] != "7" or not parts[2].isdigit():
        return False
    iterations = int(parts[2])
    if not 1 <= iterations <= 10_000_000:
        return False
    try:
        salt = base64.b64decode(parts[3], validate=True)
        expected = base64.b64decode(parts[4], validate=True)
    except ValueError:
        return False
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations, len(expected))
    return bool(expected) and hmac.compare_digest(digest, expected)


def init_access(
    directory: str | os.PathLike[str],
    *,
    hops: int,
    client_processes: int,
    prefix: str,
    overwrite: bool = False,
    clients_per_process: int | None = EVEN_SHARE,
    hop_workers: int = 1,
) -> tuple[str, ...]:
    """Write ``directory/access/`` (module docstring) and return the identities.

    Passwords come from the OS CSPRNG (``secrets.token_bytes``); private files are created
    0600 with O_EXCL (the key directory's ``_write_file``). AccessError if a file exists and
    ``overwrite`` is false (nothing is written then), InvalidParameterError for bad parameters.
    """
    names = identities(hops, client_processes, hop_workers)
    rules = access_rules(prefix, hops, client_processes, hop_workers)
    if clients_per_process is not EVEN_SHARE:
        ClientRoster(client_processes=client_processes, clients_per_process=clients_per_process)
    root = access_directory(directory)
    _prepare_access_directory(root, overwrite=overwrite)
    passwords = _write_passwords(root, names, overwrite=overwrite)
    passwd = "".join(f"{name}:{hash_password(passwords[name])}\n" for name in names)
    _write_file(root / "passwd", passwd.encode(), PRIVATE_FILE_MODE, replace=overwrite)
    _write_file(root / "acl", acl_text(rules).encode(), PRIVATE_FILE_MODE, replace=overwrite)
    bounds = _install_bounds_plugin(root, overwrite=overwrite)
    conf = _mosquitto_config_text(root, bounds_settings(client_payload_bytes(hops), bounds))
    _write_file(root / "mosquitto.conf", conf.encode(), PUBLIC_FILE_MODE, replace=overwrite)
    _write_client_keys(root, client_processes, overwrite=overwrite)
    document = {
        "format": FORMAT,
        "version": VERSION,
        "prefix": prefix,
        "n_hops": hops,
        "client_processes": client_processes,
        "clients_per_process": clients_per_process,
        "identities": list(names),
    } | ({"hop_workers": hop_workers} if hop_workers > 1 else {})
    _write_file(
        root / "access.json",
        (json.dumps(document, indent=2) + "\n").encode(),
        PUBLIC_FILE_MODE,
        replace=overwrite,
    )
    return names


def _prepare_access_directory(root: Path, *, overwrite: bool) -> None:
    """Create ``root`` (mode 0700, parents too) if missing; AccessError if it is not a directory,
    or holds any file and ``overwrite`` is false."""
    if os.path.lexists(root) and not root.is_dir():
        raise AccessError(f"{root}: access directory must be a directory, it is not")
    if not overwrite and root.exists() and any(root.iterdir()):
        raise AccessError(
            f"{root}: access directory already holds files (--overwrite replaces the "
            f"broker credentials)"
        )
    root.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)


def _write_passwords(root: Path, names: tuple[str, ...], *, overwrite: bool) -> dict[str, str]:
    """Draw a fresh password per identity (the URL-safe base64 of PASSWORD_BYTES bytes from the
    OS CSPRNG, unpadded), write each to ``<identity>.password`` (0600); return them by name."""
    passwords = {
        name: base64.urlsafe_b64encode(secrets.token_bytes(PASSWORD_BYTES)).decode().rstrip("=")
        for name in names
    }
    for name, password in passwords.items():
        _write_file(
            root / f"{name}.password",
            (password + "\n").encode(),
            PRIVATE_FILE_MODE,
            replace=overwrite,
        )
    return passwords


def _install_bounds_plugin(root: Path, *, overwrite: bool) -> PluginBuild:
    """The per-role bounds plugin (:mod:`shuffledp.security.mosquitto_bounds`), built or taken from
    its cache and copied to ``root/mosquitto_bounds.so`` (0644: the broker's user reads it, like the
    passwd and acl files); what :func:`build_bounds_plugin` says if it cannot be built."""
    build = build_bounds_plugin()
    if build.path is None:
        return build
    target = root / LIBRARY
    _write_file(target, build.path.read_bytes(), PUBLIC_FILE_MODE, replace=overwrite)
    return PluginBuild(target)


def installed_bounds_plugin(root: Path) -> PluginBuild:
    """The bounds plugin :func:`init_access` copied into the access directory ``root``, or, if
    it is not there, why not (what :func:`build_bounds_plugin` says, or that it is missing):
    for a configuration written after ``init_access`` (``keys init --tls``)."""
    target = root / LIBRARY
    if target.is_file():
        return PluginBuild(target)
    build = build_bounds_plugin()
    if build.path is None:
        return build
    return PluginBuild(None, f"{target} is missing (`shuffledp keys init --overwrite` installs it)")


def _mosquitto_config_text(root: Path, bounds: str) -> str:
    """``mosquitto.conf`` of the access directory ``root``: its accounts and ACL, the per-role
    bounds (``bounds``: :func:`bounds_settings`), the delivery and persistence settings, one
    listener on 127.0.0.1:1883."""
    return (
        mosquitto_auth_settings(root)
        + bounds
        + MOSQUITTO_DELIVERY_SETTINGS
        + mosquitto_persistence_settings(root)
        + f"listener {MOSQUITTO_LISTENER_PORT} 127.0.0.1\n"
        + MOSQUITTO_LISTENER_ACCOUNT_SETTINGS
    )


def _write_client_keys(root: Path, client_processes: int, *, overwrite: bool) -> None:
    """Draw the client master key (OS CSPRNG) and write it to ``client-master.key``, then each
    client process's key derived from it to ``clients-<j>.clientkey`` (all 0600, hex)."""
    master = secrets.token_bytes(MASTER_KEY_SIZE)
    _write_file(
        root / CLIENT_MASTER_FILE,
        (master.hex() + "\n").encode(),
        PRIVATE_FILE_MODE,
        replace=overwrite,
    )
    for process in range(client_processes):
        _write_file(
            root / f"clients-{process}.clientkey",
            (process_key(master, process).hex() + "\n").encode(),
            PRIVATE_FILE_MODE,
            replace=overwrite,
        )


def acl_text(rules: tuple[AccessRules, ...]) -> str:
    """The Mosquitto ACL file of ``rules`` (anything not listed is denied)."""
    lines = [
        "# shuffledp broker ACL (made by `shuffledp keys init`): anything not listed is denied"
    ]
    for rule in rules:
        lines.append(f"\nuser {rule.identity}")
        lines.extend(f"topic read {topic}" for topic in rule.read)
        lines.extend(f"topic write {topic}" for topic in rule.write)
    return "\n".join(lines) + "\n"


MAX_PACKET_BYTES = STAGE_PACKET_BYTES
"""Largest MQTT packet a Mosquitto made by shuffledp accepts (:mod:`shuffledp.security.broker_limits`)."""

MOSQUITTO_DELIVERY_SETTINGS = mosquitto_limit_settings()
"""Mosquitto lines every configuration made here needs: bounded queues large enough that no
report of a round is dropped, the packet size bound (in the broker template of
shuffledp/brokers/mosquitto.py, the ``mosquitto.conf`` of ``keys init`` and the TLS one)."""


def mosquitto_persistence_settings(location: str | os.PathLike[str]) -> str:
    """Mosquitto lines that keep sessions and queued messages across a broker restart, in
    ``location``/mosquitto.db (saved every 300 s and on a graceful stop)."""
    root = os.path.join(os.path.abspath(location), "")
    return (
        "# Keep sessions, subscriptions and queued messages across a restart (a graceful stop\n"
        "# saves everything; a crash loses what came after the last save, at most 300 s: a\n"
        "# save stalls the broker while it writes, so not much more often).\n"
        "persistence true\n"
        f"persistence_location {root}\n"
        "autosave_interval 300\n"
    )


def mosquitto_auth_settings(access_dir: Path) -> str:
    """Mosquitto 2.x lines that switch on the accounts and ACL of ``access_dir`` (put them
    before any listener; ``per_listener_settings false`` makes them apply to all)."""
    root = Path(os.path.abspath(access_dir))
    return (
        "# Accounts and topic ACLs made by `shuffledp keys init` (shuffledp/security/access.py).\n"
        "per_listener_settings false\n"
        "allow_anonymous false\n"
        f"password_file {root / 'passwd'}\n"
        f"acl_file {root / 'acl'}\n"
    )


MOSQUITTO_LISTENER_ACCOUNT_SETTINGS = """\
# On this listener every connection's client id is its account name: no account can connect
# under another account's client id and take over its connection and persistent session.
use_username_as_clientid true
"""
"""Mosquitto lines that tie client ids to accounts; a listener setting: they must follow each
``listener`` line (placed before the first one they would open a default listener on port
1883 of every interface)."""


def load_password(directory: str | os.PathLike[str], identity: str) -> str:
    """The broker password of ``identity`` from ``directory/access/<identity>.password``.
    AccessError naming the file if it is missing, readable by group or others, or malformed."""
    if not isinstance(identity, str) or not _IDENTITY.fullmatch(identity):
        raise AccessError(
            f"{directory}: broker identity must be hop-<i>, analyzer, monitor or clients-<j>, "
            f"got {identity!r}"
        )
    path = access_directory(directory) / f"{identity}.password"
    if not path.exists():
        raise AccessError(
            f"{path}: broker password file must exist, it does not (`shuffledp keys init` writes "
            f"one per identity; pass --no-auth only for an open broker)"
        )
    try:
        data = _read_private_file(path)
    except KeyDirectoryError as exc:
        raise AccessError(str(exc).replace("private key file", "password file")) from None
    text = data.decode("ascii", errors="replace").strip()
    if not re.fullmatch(r"[A-Za-z0-9_-]{16,128}", text):
        raise AccessError(
            f"{path}: password file must hold 16..128 URL-safe base64 characters, it does not"
        )
    return text


def _load_secret(path: Path, what: str) -> bytes:
    """The 32 bytes of a 64-hex-character secret file (0600); AccessError naming the file."""
    if not path.exists():
        raise AccessError(
            f"{path}: {what} file must exist, it does not (`shuffledp keys init` writes it; "
            f"pass --no-auth only for an open deployment)"
        )
    try:
        data = _read_private_file(path)
    except KeyDirectoryError as exc:
        raise AccessError(str(exc).replace("private key file", f"{what} file")) from None
    text = data.decode("ascii", errors="replace").strip()
    if not re.fullmatch(r"[0-9a-fA-F]{64}", text):
        raise AccessError(
            f"{path}: {what} file must hold exactly 64 hex characters (surrounding whitespace "
            f"allowed), it does not ({len(data)} bytes)"
        )
    return bytes.fromhex(text)


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessSettings:
    """What ``access/access.json`` records: the topic prefix the ACL is written for, the hops,
    and the enrolment: ``client_processes`` processes of ``clients_per_process`` clients each,
    or None for an even share of each round (:data:`EVEN_SHARE`)."""

    prefix: str
    n_hops: int
    client_processes: int
    clients_per_process: int | None

    def __post_init__(self) -> None:
        validate_prefix(self.prefix)
        require_int("n_hops", self.n_hops, 1, MAX_HOPS)
        ClientRoster(
            client_processes=self.client_processes,
            clients_per_process=1 if self.clients_per_process is None else self.clients_per_process,
        )

    def roster(self, expected: int | None = None) -> ClientRoster:
        """Who hop 0 accepts in a round of ``expected`` reports: the fixed enrolment, or each
        process's even share, ceil(expected / client_processes) (then ``expected`` is needed:
        InvalidParameterError without it)."""
        per_process = self.clients_per_process
        if per_process is None:
            if expected is None:
                raise InvalidParameterError(
                    "an even-share enrolment needs the round's size (--expected), got none"
                )
            require_int("--expected", expected, 1)
            per_process = -(-expected // self.client_processes)
        return ClientRoster(client_processes=self.client_processes, clients_per_process=per_process)


def load_access_settings(directory: str | os.PathLike[str]) -> AccessSettings:
    """The settings of ``directory/access/access.json``; AccessError naming the file and the
    rule if it is missing or malformed."""
    path = access_directory(directory) / "access.json"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AccessError(
            f"{path}: access file must exist, it does not (`shuffledp keys init` writes it)"
        ) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise AccessError(f"{path}: access file must be readable JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise AccessError(f"{path}: access file must have format {FORMAT!r}, it does not")
    fields: dict[str, Any] = document  # each value is checked below, whatever its type
    prefix: Any = fields.get("prefix")  # each value is checked when built
    n_hops: Any = fields.get("n_hops")
    processes: Any = fields.get("client_processes")
    try:
        return AccessSettings(
            prefix=prefix,
            n_hops=n_hops,
            client_processes=processes,
            # null, or a directory from before client authentication: the even share.
            clients_per_process=fields.get("clients_per_process", EVEN_SHARE),
        )
    except InvalidParameterError as exc:
        raise AccessError(f"{path}: {exc}") from None


def load_client_verifier(
    directory: str | os.PathLike[str],
    round_id: int,
    *,
    expected: int | None = None,
    roster: ClientRoster | None = None,
) -> ClientVerifier:
    """Hop 0's client authentication for ``round_id``: the master key of ``directory/access``
    and ``roster`` (a round manifest's exact enrolment), or without it the enrolment of
    ``access.json`` for ``expected`` reports (:meth:`AccessSettings.roster`). AccessError
    naming the file for anything missing or malformed."""
    master = _load_secret(access_directory(directory) / CLIENT_MASTER_FILE, "client master key")
    if roster is None:
        roster = load_access_settings(directory).roster(expected)
    return ClientVerifier(master_key=master, roster=roster, round_id=round_id)


def load_process_credentials(directory: str | os.PathLike[str], process: int) -> ProcessCredentials:
    """Client process ``process``'s key, from ``access/clients-<process>.clientkey``."""
    require_int("process", process, 0, MAX_CLIENT_PROCESSES - 1)
    path = access_directory(directory) / f"clients-{process}.clientkey"
    return ProcessCredentials(process=process, key=_load_secret(path, "client process key"))


def parse_password_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """``{identity: $7$ hash}`` of a Mosquitto password file (comments and blank lines
    skipped). AccessError naming the line for a line without ``name:hash``."""
    users: dict[str, str] = {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AccessError(f"{path}: password file must be readable UTF-8: {exc}") from None
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, colon, hashed = line.partition(":")
        if not colon or not name or not hashed:
            raise AccessError(f"{path}:{number}: a line must be name:hash")
        users[name] = hashed
    return users


def parse_acl_file(path: str | os.PathLike[str]) -> dict[str, AccessRules]:
    """``{identity: AccessRules}`` of a Mosquitto ACL file restricted to ``user NAME`` and
    ``topic read|write|readwrite FILTER`` lines (what :func:`acl_text` writes). AccessError
    naming the line for anything else (a rule this parser would not enforce)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AccessError(f"{path}: ACL file must be readable UTF-8: {exc}") from None
    read: dict[str, list[str]] = {}
    write: dict[str, list[str]] = {}
    user: str | None = None
    for number, raw in enumerate(text.split("\n"), start=1):
        words = raw.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "user" and len(words) == 2:
            user = words[1]
            read.setdefault(user, [])
            write.setdefault(user, [])
        elif words[0] == "topic" and len(words) == 3 and words[1] in ("read", "write", "readwrite"):
            if user is None:
                raise AccessError(f"{path}:{number}: a topic rule must follow a 'user' line")
            if words[1] in ("read", "readwrite"):
                read[user].append(words[2])
            if words[1] in ("write", "readwrite"):
                write[user].append(words[2])
        else:
            raise AccessError(
                f"{path}:{number}: a line must be 'user NAME' or 'topic read|write|readwrite "
                f"FILTER', got {raw.strip()[:80]!r}"
            )
    return {
        name: AccessRules(identity=name, read=tuple(read[name]), write=tuple(write[name]))
        for name in read
    }


def topic_matches(topic: str, allowed: str) -> bool:
    """True iff ``topic`` (a topic, or a subscription filter) lies within the ACL filter
    ``allowed``: level by level, '+' in ``allowed`` matches any one level and a final '#' any
    rest; a wildcard in ``topic`` is matched only by the same wildcard or a wider one in
    ``allowed`` (so subscribing to 'a/+' needs 'a/+' or 'a/#', never just 'a/b')."""
    wanted = topic.split("/")
    rule = allowed.split("/")
    for index, level in enumerate(rule):
        if level == "#":
            return index == len(rule) - 1
        if index >= len(wanted):
            return False
        if wanted[index] == "#":
            return False
        if level == "+":
            continue
        if wanted[index] != level:
            return False
    return len(wanted) == len(rule)


def require_identity(identity: str) -> str:
    """``identity`` if it is a valid broker identity name, else InvalidParameterError."""
    if not isinstance(identity, str) or not _IDENTITY.fullmatch(identity):
        raise InvalidParameterError(
            f"broker identity must be hop-<i>, analyzer, monitor or clients-<j>, got {identity!r}"
        )
    return identity
