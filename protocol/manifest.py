"""The round manifest: everything the parties of a round must agree on, signed once (pure core).

A round's parameters used to live in each process's flags, and nothing tied them together: an
analyzer started with the wrong ``--eps0`` published a guarantee for parameters the clients did
not use. The manifest is the one authenticated definition of a round (or a series of rounds)
that every party holds and checks, as the IETF DAP/PPM "task" is for its protocol: protocol
version, prefix and round ids, k and the value labels, eps0, the hops in order with their
public (X25519 box) keys and Ed25519 signing keys, the analyzer's keys, the enrolled clients
(each client process's exact number of clients, no rounding slack), the expected number of
reports, the deadline and minimum batch, the delta target of the report, and the number C of
colluding clients the published guarantee withstands.

Identity and signature. The manifest's canonical bytes are its JSON object with sorted keys, no
whitespace and ASCII only (:meth:`Manifest.canonical_bytes`); JSON floats are written with
Python's shortest round-trip repr, so a manifest read back gives the same bytes. Its **digest**,
``SHA-256(DOMAIN_DIGEST | canonical bytes)``, is its identity: records, frames and END
statements carry it. The coordinator signs ``DOMAIN_SIGNATURE | canonical bytes`` with Ed25519
(PyNaCl's ``nacl.signing``, libsodium ``crypto_sign``); the manifest names the coordinator's
verify key, and a reader checks the signature against the coordinator key it trusts (the key
directory's ``public.json``), never against the key the file names alone.

File (``shuffledp round init`` writes it)::

    {"format": "shuffledp-round-manifest", "version": 1,
     "manifest": {...the fields...}, "signature": "<128 hex characters>"}

Every rule is checked when a :class:`Manifest` is built, with the field's name in the message
(``manifest field eps0 must be > 0, got -1``); a file that breaks one, or whose signature does
not verify, raises :class:`ManifestError` naming the file.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nacl.exceptions import BadSignatureError, CryptoError
from nacl.signing import SigningKey, VerifyKey

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.onion import KEY_SIZE, public_key_from_bytes
from shuffledp.protocol.record import MAX_K, MAX_ROUND_ID
from shuffledp.protocol.topics import validate_prefix
from shuffledp.validation import require_int, require_keys

__all__ = [
    "DIGEST_SIZE",
    "FORMAT",
    "MAX_CLIENT_PROCESSES",
    "SIGNATURE_SIZE",
    "WIRE_VERSION",
    "Manifest",
    "ManifestError",
    "SignedManifest",
    "StageKeys",
    "load_manifest",
    "read_manifest",
    "sign_manifest",
]

FORMAT = "shuffledp-round-manifest"
FILE_VERSION = 1
WIRE_VERSION = 2
"""The wire format the manifest's rounds speak (records and frames of version 2 carry the
manifest digest; docs/protocol.md)."""
DIGEST_SIZE = 32
SIGNATURE_SIZE = 64
DOMAIN_DIGEST = b"shuffledp/manifest-digest/v1\x00"
DOMAIN_SIGNATURE = b"shuffledp/manifest-signature/v1\x00"
MAX_CLIENT_PROCESSES = 1 << 16
MAX_CLIENTS_PER_PROCESS = 1 << 32
MAX_HOPS = 64
MAX_ROUNDS = 100_000
MAX_LABEL_LENGTH = 64
MAX_FILE_BYTES = 16 << 20

_HEX = re.compile(r"[0-9a-f]*")
_FIELDS = (
    "protocol_version",
    "prefix",
    "rounds",
    "k",
    "labels",
    "eps0",
    "hops",
    "analyzer",
    "clients",
    "client_auth",
    "expected",
    "min_batch",
    "deadline",
    "delta",
    "colluders",
    "coordinator",
)


class ManifestError(InvalidParameterError):
    """A manifest file or field breaks a rule, its signature does not verify, or a process's
    flag or key contradicts it; the message names the file or the field."""


def _field(name: str) -> str:
    return f"manifest field {name}"


def _require_hex_key(name: str, value: object, size: int) -> bytes:
    if isinstance(value, bytes) and len(value) == size:
        return value
    shown = value.hex() if isinstance(value, bytes) else repr(value)
    raise ManifestError(f"{_field(name)} must be {size} bytes, got {shown[:80]}")


def _hex_bytes(name: str, value: object, size: int) -> bytes:
    """The bytes of a lowercase hex string of exactly ``size`` bytes (JSON side)."""
    if not isinstance(value, str) or len(value) != 2 * size or not _HEX.fullmatch(value):
        raise ManifestError(
            f"{_field(name)} must be {2 * size} lowercase hex characters, got {value!r:.80}"
        )
    return bytes.fromhex(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class StageKeys:
    """A stage's public keys: ``box`` (X25519, what clients seal to) and ``sign`` (Ed25519,
    what its signed statements verify with)."""

    box: bytes
    sign: bytes
    name: str = field(default="stage", compare=False)

    def __post_init__(self) -> None:
        _require_hex_key(f"{self.name}.box", self.box, KEY_SIZE)
        _require_hex_key(f"{self.name}.sign", self.sign, KEY_SIZE)
        try:
            public_key_from_bytes(self.box)
        except InvalidParameterError as exc:
            raise ManifestError(f"{_field(self.name + '.box')}: {exc}") from None

    @property
    def verify_key(self) -> VerifyKey:
        return VerifyKey(self.sign)

    def to_json(self) -> dict[str, str]:
        return {"box": self.box.hex(), "sign": self.sign.hex()}

    @classmethod
    def from_json(cls, name: str, data: object) -> StageKeys:
        fields = _require_object(name, data, ("box", "sign"))
        return cls(
            box=_hex_bytes(f"{name}.box", fields["box"], KEY_SIZE),
            sign=_hex_bytes(f"{name}.sign", fields["sign"], KEY_SIZE),
            name=name,
        )


def _require_object(
    name: str, data: object, keys: Sequence[str], optional: Sequence[str] = ()
) -> Mapping[str, object]:
    try:
        return require_keys(_field(name), data, keys, optional)
    except InvalidParameterError as exc:
        raise ManifestError(str(exc)) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    """One round's (or a series of rounds') agreed definition; module docstring.

    ``clients[j]`` is the number of clients client process j hosts: their ids are
    ``j << 32 | i`` for ``i < clients[j]`` (protocol/client_auth.py), and ``expected`` must be
    their sum (no slack: every enrolled client is expected once). ``colluders`` C in
    [0, expected): the published guarantee is computed for the counted reports minus C.
    """

    prefix: str
    rounds: tuple[int, ...]
    k: int
    labels: tuple[str, ...]
    eps0: float
    hops: tuple[StageKeys, ...]
    analyzer: StageKeys
    clients: tuple[int, ...]
    expected: int
    min_batch: int
    deadline: float
    delta: float
    colluders: int
    coordinator: bytes
    client_auth: bool = True
    protocol_version: int = WIRE_VERSION
    hop_workers: int = 1
    """W: every hop is W peeling processes and one mixer (docs/hop-workers.md); 1 (the
    default, and a manifest without the field): one process per hop. Each of a hop's processes
    holds the hop's keys (``hops[i]``); peeler P of hop i is ``hop-i-pP``, its mixer ``hop-i``.
    Hop 0's peeler P takes the client processes j with j mod W = P."""

    def __post_init__(self) -> None:
        self._check_identity()
        self._check_mechanism()
        self._check_stages()
        self._check_enrolment()
        self._check_workers()

    def _check_identity(self) -> None:
        if self.protocol_version != WIRE_VERSION or isinstance(self.protocol_version, bool):
            raise ManifestError(
                f"{_field('protocol_version')} must be {WIRE_VERSION} (this code's wire format), "
                f"got {self.protocol_version!r}"
            )
        try:
            validate_prefix(self.prefix)
        except InvalidParameterError as exc:
            raise ManifestError(f"{_field('prefix')}: {exc}") from None
        if not isinstance(self.rounds, tuple) or not 1 <= len(self.rounds) <= MAX_ROUNDS:
            raise ManifestError(
                f"{_field('rounds')} must hold 1 to {MAX_ROUNDS} round ids, got {self.rounds!r:.80}"
            )
        for round_id in self.rounds:
            _manifest_int("rounds", round_id, 0, MAX_ROUND_ID)
        if len(set(self.rounds)) != len(self.rounds) or list(self.rounds) != sorted(self.rounds):
            raise ManifestError(f"{_field('rounds')} must be distinct and increasing")
        _require_hex_key("coordinator", self.coordinator, KEY_SIZE)
        if not isinstance(self.client_auth, bool):
            raise ManifestError(
                f"{_field('client_auth')} must be true or false, got {self.client_auth!r}"
            )

    def _check_mechanism(self) -> None:
        _manifest_int("k", self.k, 2, MAX_K)
        if not isinstance(self.labels, tuple) or len(self.labels) != self.k:
            raise ManifestError(
                f"{_field('labels')} must hold k = {self.k} labels, got "
                f"{len(self.labels) if isinstance(self.labels, tuple) else self.labels!r}"
            )
        for label in self.labels:
            if not isinstance(label, str) or not 1 <= len(label) <= MAX_LABEL_LENGTH:
                raise ManifestError(
                    f"{_field('labels')} must be strings of 1 to {MAX_LABEL_LENGTH} characters, "
                    f"got {label!r:.80}"
                )
        if len(set(self.labels)) != self.k:
            raise ManifestError(f"{_field('labels')} must be distinct")
        _manifest_positive("eps0", self.eps0)
        _manifest_positive("deadline", self.deadline)
        if not _is_real(self.delta) or not 0 < self.delta < 1:
            raise ManifestError(f"{_field('delta')} must be in (0, 1), got {self.delta!r}")

    def _check_stages(self) -> None:
        if not isinstance(self.hops, tuple) or not 1 <= len(self.hops) <= MAX_HOPS:
            raise ManifestError(
                f"{_field('hops')} must hold 1 to {MAX_HOPS} hops, got {self.hops!r:.80}"
            )
        stages = [*self.hops, self.analyzer]
        for stage in stages:
            if not isinstance(stage, StageKeys):
                raise ManifestError(f"{_field('hops')} must hold stage keys, got {stage!r:.80}")
        names = [f"hops[{i}]" for i in range(len(self.hops))] + ["analyzer"]
        for attribute in ("box", "sign"):
            seen: dict[bytes, str] = {}
            for name, stage in zip(names, stages, strict=True):
                key = getattr(stage, attribute)
                if key in seen:
                    raise ManifestError(
                        f"{_field(name + '.' + attribute)} must differ from every other stage's, "
                        f"it equals {seen[key]}'s"
                    )
                seen[key] = name

    def _check_workers(self) -> None:
        _manifest_int("hop_workers", self.hop_workers, 1, 256)
        if self.hop_workers > len(self.clients):
            raise ManifestError(
                f"{_field('hop_workers')} must be at most the {len(self.clients)} client "
                f"processes (each peeler of hop 0 takes whole client processes), got "
                f"{self.hop_workers}"
            )

    def peeler_share(self, worker: int) -> int:
        """The reports hop 0's peeler ``worker`` is owed: its client processes' clients."""
        return sum(c for j, c in enumerate(self.clients) if j % self.hop_workers == worker)

    def _check_enrolment(self) -> None:
        if not isinstance(self.clients, tuple) or not 1 <= len(self.clients) <= (
            MAX_CLIENT_PROCESSES
        ):
            raise ManifestError(
                f"{_field('clients')} must hold 1 to {MAX_CLIENT_PROCESSES} client processes' "
                f"counts, got {self.clients!r:.80}"
            )
        for count in self.clients:
            _manifest_int("clients", count, 1, MAX_CLIENTS_PER_PROCESS)
        _manifest_int("expected", self.expected, 1)
        if self.expected != sum(self.clients):
            raise ManifestError(
                f"{_field('expected')} must equal the enrolled clients, sum(clients) = "
                f"{sum(self.clients)}, got {self.expected}"
            )
        _manifest_int("min_batch", self.min_batch, 1, self.expected)
        _manifest_int("colluders", self.colluders, 0, self.expected - 1)

    # --- what the parties use ----------------------------------------------------------------

    @property
    def n_hops(self) -> int:
        return len(self.hops)

    @property
    def guarantee_n(self) -> int:
        """The n the guarantee is computed for when every expected report is counted:
        ``expected - colluders`` (the colluders' reports are known to the adversary)."""
        return self.expected - self.colluders

    def covers(self, round_id: int) -> bool:
        return round_id in self.rounds

    def stage_keys(self, stage: str) -> StageKeys:
        """The keys of ``stage`` ("hop-<i>" or "analyzer"); ManifestError for another name."""
        if stage == "analyzer":
            return self.analyzer
        match = re.fullmatch(r"hop-(0|[1-9][0-9]*)", stage)
        if match is None or int(match.group(1)) >= self.n_hops:
            raise ManifestError(
                f"stage must be one of hop-0..hop-{self.n_hops - 1} or analyzer (the manifest's "
                f"stages), got {stage!r}"
            )
        return self.hops[int(match.group(1))]

    # --- bytes, digest, JSON -----------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "protocol_version": self.protocol_version,
            "prefix": self.prefix,
            "rounds": list(self.rounds),
            "k": self.k,
            "labels": list(self.labels),
            # float(): an int given in Python (eps0=4) must give the bytes a reader's float
            # gives back ("4.0"), or a manifest built in code would not verify once read.
            "eps0": float(self.eps0),
            "hops": [stage.to_json() for stage in self.hops],
            "analyzer": self.analyzer.to_json(),
            "clients": list(self.clients),
            "client_auth": self.client_auth,
            "expected": self.expected,
            "min_batch": self.min_batch,
            "deadline": float(self.deadline),
            "delta": float(self.delta),
            "colluders": self.colluders,
            "coordinator": self.coordinator.hex(),
        } | ({"hop_workers": self.hop_workers} if self.hop_workers != 1 else {})

    @classmethod
    def from_json(cls, data: object) -> Manifest:
        fields = _require_object("manifest", data, _FIELDS, ("hop_workers",))
        hops = fields["hops"]
        if not isinstance(hops, list):
            raise ManifestError(f"{_field('hops')} must be a list, got {hops!r:.80}")
        return cls(
            protocol_version=_json_int("protocol_version", fields["protocol_version"]),
            prefix=_json_str("prefix", fields["prefix"]),
            rounds=tuple(_json_list("rounds", fields["rounds"], _json_int)),
            k=_json_int("k", fields["k"]),
            labels=tuple(_json_list("labels", fields["labels"], _json_str)),
            eps0=_json_float("eps0", fields["eps0"]),
            hops=tuple(StageKeys.from_json(f"hops[{i}]", hop) for i, hop in enumerate(hops)),
            analyzer=StageKeys.from_json("analyzer", fields["analyzer"]),
            clients=tuple(_json_list("clients", fields["clients"], _json_int)),
            client_auth=_json_bool("client_auth", fields["client_auth"]),
            expected=_json_int("expected", fields["expected"]),
            min_batch=_json_int("min_batch", fields["min_batch"]),
            deadline=_json_float("deadline", fields["deadline"]),
            delta=_json_float("delta", fields["delta"]),
            colluders=_json_int("colluders", fields["colluders"]),
            coordinator=_hex_bytes("coordinator", fields["coordinator"], KEY_SIZE),
            hop_workers=_json_int("hop_workers", fields.get("hop_workers", 1)),
        )

    def canonical_bytes(self) -> bytes:
        """The bytes that are digested and signed (module docstring)."""
        return json.dumps(
            self.to_json(),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=True,
            allow_nan=False,
        ).encode("ascii")

    @property
    def digest(self) -> bytes:
        """SHA-256(DOMAIN_DIGEST | canonical bytes): the manifest's identity (32 bytes)."""
        return hashlib.sha256(DOMAIN_DIGEST + self.canonical_bytes()).digest()


def _is_real(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _manifest_int(name: str, value: object, low: int, high: int | None = None) -> None:
    try:
        require_int(_field(name), value, low, high)  # type: ignore[arg-type]
    except InvalidParameterError as exc:
        raise ManifestError(str(exc)) from None


def _manifest_positive(name: str, value: object) -> None:
    if not _is_real(value) or not value > 0:  # type: ignore[operator]
        raise ManifestError(f"{_field(name)} must be a finite number > 0, got {value!r}")


def _json_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ManifestError(f"{_field(name)} must be an integer, got {value!r:.80}")
    return value


def _json_float(name: str, value: object) -> float:
    if not _is_real(value):
        raise ManifestError(f"{_field(name)} must be a finite number, got {value!r:.80}")
    return float(value)  # type: ignore[arg-type]


def _json_str(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ManifestError(f"{_field(name)} must be a string, got {value!r:.80}")
    return value


def _json_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ManifestError(f"{_field(name)} must be true or false, got {value!r:.80}")
    return value


def _json_list(name: str, value: object, item: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ManifestError(f"{_field(name)} must be a list, got {value!r:.80}")
    return [item(name, element) for element in value]


@dataclass(frozen=True, slots=True, kw_only=True)
class SignedManifest:
    """A manifest and the coordinator's Ed25519 signature of its canonical bytes. Building
    one does not verify the signature: :meth:`verified` does, against a trusted key."""

    manifest: Manifest
    signature: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.manifest, Manifest):
            raise ManifestError(f"manifest must be a Manifest, got {self.manifest!r:.80}")
        _require_hex_key("signature", self.signature, SIGNATURE_SIZE)

    def verified(self, trusted_coordinator: bytes) -> Manifest:
        """The manifest, once its signature verifies with ``trusted_coordinator`` (the
        coordinator key the reader trusts) and the manifest names that same key;
        ManifestError otherwise."""
        trusted = _require_hex_key("trusted coordinator key", trusted_coordinator, KEY_SIZE)
        if self.manifest.coordinator != trusted:
            raise ManifestError(
                f"manifest must be signed by the trusted coordinator key {trusted.hex()[:16]}..., "
                f"it names {self.manifest.coordinator.hex()[:16]}..."
            )
        try:
            VerifyKey(trusted).verify(
                DOMAIN_SIGNATURE + self.manifest.canonical_bytes(), self.signature
            )
        except (BadSignatureError, CryptoError, ValueError):
            raise ManifestError(
                "manifest signature must verify with the coordinator key, it does not (the file "
                "was changed after it was signed, or signed by another key)"
            ) from None
        return self.manifest

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": FILE_VERSION,
            "manifest": self.manifest.to_json(),
            "signature": self.signature.hex(),
        }

    @classmethod
    def from_json(cls, data: object) -> SignedManifest:
        try:
            fields = require_keys(
                "manifest file", data, ("format", "version", "manifest", "signature")
            )
        except InvalidParameterError as exc:
            raise ManifestError(str(exc)) from None
        if fields["format"] != FORMAT or fields["version"] != FILE_VERSION:
            raise ManifestError(
                f"manifest file must have format {FORMAT!r} version {FILE_VERSION}, got "
                f"{fields['format']!r:.40} version {fields['version']!r:.20}"
            )
        return cls(
            manifest=Manifest.from_json(fields["manifest"]),
            signature=_hex_bytes("signature", fields["signature"], SIGNATURE_SIZE),
        )

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, allow_nan=False) + "\n"


def sign_manifest(manifest: Manifest, signing_key: SigningKey) -> SignedManifest:
    """``manifest`` signed with the coordinator's ``signing_key`` (whose verify key the
    manifest must name as its coordinator)."""
    if not isinstance(signing_key, SigningKey):
        raise InvalidParameterError(
            f"signing key must be a nacl.signing.SigningKey, got {type(signing_key).__name__}"
        )
    if bytes(signing_key.verify_key) != manifest.coordinator:
        raise ManifestError(
            "manifest field coordinator must be the signing key's verify key, it is not"
        )
    signed = signing_key.sign(DOMAIN_SIGNATURE + manifest.canonical_bytes())
    return SignedManifest(manifest=manifest, signature=signed.signature)


def read_manifest(path: str | os.PathLike[str]) -> SignedManifest:
    """The signed manifest in the file ``path``, NOT verified (:meth:`SignedManifest.verified`
    does that); ManifestError naming the file for anything unreadable or malformed."""
    where = Path(path)
    try:
        with open(where, "rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ManifestError(f"{where}: manifest file must be readable: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ManifestError(f"{where}: manifest file must be at most {MAX_FILE_BYTES} bytes")
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ManifestError(f"{where}: manifest file must be UTF-8 JSON: {exc}") from None
    try:
        return SignedManifest.from_json(document)
    except ManifestError as exc:
        raise ManifestError(f"{where}: {exc}") from None


def load_manifest(path: str | os.PathLike[str], trusted_coordinator: bytes) -> Manifest:
    """The manifest in the file ``path``, verified against ``trusted_coordinator``;
    ManifestError naming the file for anything unreadable, malformed or unverified."""
    signed = read_manifest(path)
    try:
        return signed.verified(trusted_coordinator)
    except ManifestError as exc:
        raise ManifestError(f"{Path(path)}: {exc}") from None
