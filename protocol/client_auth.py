"""One report per enrolled client per round: the authenticator envelope hop 0 checks (pure core).

Why: broker accounts (shuffledp.security.access) say which *process* may publish to hop 0, not how many
reports it may send. A client that sends extra reports shrinks everyone else's anonymity set
and skews the counts, so hop 0 accepts at most one report per enrolled client per round and then
strips the client's identity before it shuffles.

What a client publishes to hop 0 when clients are authenticated::

    client_id u64 (big-endian) | tag (32 bytes) | onion (message_length(0, H) bytes)

``tag = HMAC-SHA256(client_key, DOMAIN_REPORT | round_id u64 | client_id u64 | onion)``: it binds
the onion to the client and to the round, so a tag cannot be moved to another onion, another
client or another round. The envelope is a fixed ENVELOPE_SIZE = 40 bytes, so every message hop 0
receives still has one length, and hop 0 forwards only the peeled onion
(``message_length(1, H)`` bytes): nothing downstream can tell authenticated rounds apart.

Keys, derived with HMAC-SHA256 as a PRF from one 32-byte master key held by hop 0:

- the client id space is split by client process: ``client_id = process << 32 | index``;
- ``process_key(P) = HMAC(master, DOMAIN_PROCESS | P u32)``: what client process P holds (it
  hosts the simulated clients P<<32 .. P<<32 + M - 1; a real device would instead hold only its
  own client key);
- ``client_key(id) = HMAC(process_key(id >> 32), DOMAIN_CLIENT | id u64)``.

Hop 0 enrols ``client_processes`` processes of at most ``clients_per_process`` clients each; an
id outside that roster is ``unknown-client`` (so a process holding its process key can still
mint at most M identities per round, the bound the deployment chose). A wrong tag is
``bad-authenticator``; a second report from a client whose report was already authenticated in
the round is ``client-already-reported``. Tags are compared with ``hmac.compare_digest``.
Why the standard library's ``hmac`` and not a library: HMAC-SHA256 is exactly what is needed,
and ``hmac.compare_digest`` is the constant-time comparison the standard recommends.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass, field

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.errors import BadAuthenticator, UnknownClient
from shuffledp.protocol.record import MAX_ROUND_ID
from shuffledp.validation import require_int

__all__ = [
    "ENVELOPE_SIZE",
    "MASTER_KEY_SIZE",
    "ClientCredential",
    "ClientRoster",
    "ClientVerifier",
    "ProcessCredentials",
    "client_id_of",
    "client_key",
    "process_key",
    "seal_envelope",
]

MASTER_KEY_SIZE = 32
TAG_SIZE = 32
ID = struct.Struct(">Q")
ENVELOPE_SIZE = ID.size + TAG_SIZE
MAX_CLIENT_PROCESSES = 1 << 16
MAX_CLIENTS_PER_PROCESS = 1 << 32

DOMAIN_PROCESS = b"shuffledp/client-process-key/v1\x00"
DOMAIN_CLIENT = b"shuffledp/client-key/v1\x00"
DOMAIN_REPORT = b"shuffledp/report-tag/v1\x00"


def _require_key(name: str, key: object) -> bytes:
    if not isinstance(key, bytes) or len(key) != MASTER_KEY_SIZE:
        size = len(key) if isinstance(key, bytes) else type(key).__name__
        raise InvalidParameterError(f"{name} must be {MASTER_KEY_SIZE} bytes, got {size}")
    return key


def client_id_of(process: int, index: int) -> int:
    """The id of the ``index``-th client of client process ``process``:
    ``process << 32 | index``."""
    require_int("process", process, 0, MAX_CLIENT_PROCESSES - 1)
    require_int("index", index, 0, MAX_CLIENTS_PER_PROCESS - 1)
    return process << 32 | index


def process_key(master: bytes, process: int) -> bytes:
    """The key client process ``process`` holds: HMAC-SHA256(master, DOMAIN_PROCESS | process)."""
    _require_key("master key", master)
    require_int("process", process, 0, MAX_CLIENT_PROCESSES - 1)
    return hmac.digest(master, DOMAIN_PROCESS + struct.pack(">I", process), "sha256")


def client_key(key_of_process: bytes, client_id: int) -> bytes:
    """Client ``client_id``'s key: HMAC-SHA256(process key, DOMAIN_CLIENT | client_id)."""
    _require_key("process key", key_of_process)
    require_int("client_id", client_id, 0, 2**64 - 1)
    return hmac.digest(key_of_process, DOMAIN_CLIENT + ID.pack(client_id), "sha256")


def _tag(key: bytes, round_id: int, client_id: int, onion: bytes) -> bytes:
    message = DOMAIN_REPORT + ID.pack(round_id) + ID.pack(client_id) + onion
    return hmac.digest(key, message, "sha256")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientCredential:
    """One client's identity and key (the key never appears in the repr)."""

    client_id: int
    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        require_int("client_id", self.client_id, 0, 2**64 - 1)
        _require_key("client key", self.key)

    @classmethod
    def derive(cls, key_of_process: bytes, process: int, index: int) -> ClientCredential:
        """The credential of the ``index``-th client of ``process``, from that process's key."""
        client_id = client_id_of(process, index)
        return cls(client_id=client_id, key=client_key(key_of_process, client_id))


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessCredentials:
    """What client process ``process`` holds: its process key, from which it derives the key
    of each client it hosts (``credential(i)`` for its i-th client)."""

    process: int
    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        require_int("process", self.process, 0, MAX_CLIENT_PROCESSES - 1)
        _require_key("process key", self.key)

    def credential(self, index: int) -> ClientCredential:
        return ClientCredential.derive(self.key, self.process, index)


def seal_envelope(credential: ClientCredential, round_id: int, onion: bytes) -> bytes:
    """``client_id | tag | onion`` (module docstring): what the client publishes to hop 0."""
    require_int("round_id", round_id, 0, MAX_ROUND_ID)
    if not isinstance(onion, bytes):
        raise InvalidParameterError(f"onion must be bytes, got {type(onion).__name__}")
    return (
        ID.pack(credential.client_id)
        + _tag(credential.key, round_id, credential.client_id, onion)
        + onion
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientRoster:
    """Who is enrolled: ``client_processes`` processes of at most ``clients_per_process`` each,
    or, with ``counts`` (a round manifest's exact enrolment, :meth:`exact`), exactly
    ``counts[j]`` clients of process j (``clients_per_process`` is then their maximum)."""

    client_processes: int
    clients_per_process: int
    counts: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        require_int("client_processes", self.client_processes, 1, MAX_CLIENT_PROCESSES)
        require_int("clients_per_process", self.clients_per_process, 1, MAX_CLIENTS_PER_PROCESS)
        if self.counts is not None:
            if len(self.counts) != self.client_processes:
                raise InvalidParameterError(
                    f"counts must hold client_processes = {self.client_processes} counts, got "
                    f"{len(self.counts)}"
                )
            for count in self.counts:
                require_int("counts", count, 1, self.clients_per_process)

    @classmethod
    def exact(cls, counts: tuple[int, ...]) -> ClientRoster:
        """Process j enrols exactly ``counts[j]`` clients (ids ``j << 32 | i``, i < counts[j])."""
        return cls(
            client_processes=len(counts), clients_per_process=max(counts), counts=tuple(counts)
        )

    def size(self, process: int) -> int:
        """How many clients process ``process`` enrols (0 for a process outside the roster)."""
        if not 0 <= process < self.client_processes:
            return 0
        return self.clients_per_process if self.counts is None else self.counts[process]

    def enrolled(self, client_id: int) -> bool:
        return client_id & 0xFFFFFFFF < self.size(client_id >> 32)


class ClientVerifier:
    """Hop 0's check of envelopes for one round: ``open(message) -> (client_id, onion)``.

    The process keys are derived once (one HMAC per process); each message then costs two
    HMACs (the client key, then the tag), a few microseconds against the ~150 us of opening
    a sealed box. Stateless per message (the one-report-per-client rule is the hop's, which
    knows which reports it accepted), so ``open`` may run in several threads.
    """

    def __init__(self, *, master_key: bytes, roster: ClientRoster, round_id: int) -> None:
        _require_key("master key", master_key)
        if not isinstance(roster, ClientRoster):
            raise InvalidParameterError(f"roster must be a ClientRoster, got {roster!r}")
        require_int("round_id", round_id, 0, MAX_ROUND_ID)
        self.roster = roster
        self.round_id = round_id
        self._process_keys = tuple(
            process_key(master_key, p) for p in range(roster.client_processes)
        )

    def __repr__(self) -> str:
        return f"ClientVerifier(roster={self.roster!r}, round_id={self.round_id})"

    def open(self, message: bytes) -> tuple[int, bytes]:
        """(client_id, onion) of an authentic envelope. Raises UnknownClient for an id outside
        the roster, BadAuthenticator for a tag that does not verify (or a message shorter than
        the envelope, which the hop's length check normally rejects first)."""
        if len(message) < ENVELOPE_SIZE:
            raise BadAuthenticator(
                f"an authenticated message must be at least {ENVELOPE_SIZE} bytes, "
                f"got {len(message)}"
            )
        (client_id,) = ID.unpack_from(message)
        if not self.roster.enrolled(client_id):
            raise UnknownClient(
                f"client id {client_id} (process {client_id >> 32}, index "
                f"{client_id & 0xFFFFFFFF}) is not enrolled: {self.roster.client_processes} "
                f"processes of {_enrolment(self.roster)} clients"
            )
        tag = message[ID.size : ENVELOPE_SIZE]
        onion = message[ENVELOPE_SIZE:]
        key = client_key(self._process_keys[client_id >> 32], client_id)
        if not hmac.compare_digest(tag, _tag(key, self.round_id, client_id, onion)):
            raise BadAuthenticator(
                f"the tag of client {client_id} does not verify for round {self.round_id}"
            )
        return client_id, onion


def _enrolment(roster: ClientRoster) -> str:
    if roster.counts is None:
        return str(roster.clients_per_process)
    shown = ", ".join(str(count) for count in roster.counts[:4])
    return f"exactly {shown}{', ...' if len(roster.counts) > 4 else ''}"


def fingerprint(master_key: bytes) -> str:
    """A short public name of a master key (first 16 hex digits of its SHA-256), for logs."""
    return hashlib.sha256(_require_key("master key", master_key)).hexdigest()[:16]
