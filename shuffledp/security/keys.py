"""The key directory of a deployment: one X25519 key pair per hop and one for the analyzer,
one Ed25519 signing key per stage, and the coordinator's Ed25519 key that signs round manifests.

Layout of a key directory DIR for H hops (1 <= H <= MAX_HOPS):

- ``public.json`` (mode 0644): ``{"format": "shuffledp-keys", "version": 2, "n_hops": H,
  "hops": [hex of hop 0's public key, ...], "analyzer": hex of the analyzer's public key,
  "signing": {"hop-0": hex, ..., "analyzer": hex, "coordinator": hex}}`` (the Ed25519 verify
  keys). Clients need only this file of it (with client authentication also their process key
  in ``access/``, :mod:`shuffledp.security.access`). A version 1 file (before signing keys)
  still loads, with no signing keys: what needs them (a round manifest) says so.
- ``hop-0.key`` ... ``hop-{H-1}.key`` and ``analyzer.key`` (mode 0600): the 64 lowercase hex
  characters of the stage's 32-byte X25519 private key, then a newline. Each belongs on its
  stage's machine only.
- ``hop-0.sign`` ... ``hop-{H-1}.sign``, ``analyzer.sign`` and ``coordinator.sign`` (mode
  0600): the 64 hex characters of the 32-byte Ed25519 seed (``nacl.signing.SigningKey``). A
  stage signs its END statements with its own; the coordinator (whoever runs ``shuffledp round
  init``) signs the round manifests every stage checks against ``signing.coordinator``.

Every problem with a directory or its files raises :class:`KeyDirectoryError`, whose message names
the file and the rule it breaks. Nothing here prints or logs, and no private key material appears
in any message or repr (messages about a private key file name the file, never its content).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nacl.public import PrivateKey, PublicKey
from nacl.signing import SigningKey

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.onion import (
    KEY_SIZE,
    generate_keypair,
    private_key_from_bytes,
    private_key_to_bytes,
    public_key_from_bytes,
    public_key_to_bytes,
)
from shuffledp.validation import require_int

FORMAT = "shuffledp-keys"
VERSION = 2
READABLE_VERSIONS = (1, 2)
COORDINATOR = "coordinator"
SIGN_SUFFIX = ".sign"
MAX_HOPS = 64
PUBLIC_FILE = "public.json"
ANALYZER_STAGE = "analyzer"
PRIVATE_FILE_MODE = 0o600
PUBLIC_FILE_MODE = 0o644
DIRECTORY_MODE = 0o700
FINGERPRINT_LENGTH = 16

_HEX_KEY = re.compile(r"[0-9a-fA-F]{64}")
_STAGE = re.compile(r"hop-(0|[1-9][0-9]*)|analyzer")
_HOP_FILE = re.compile(r"hop-(0|[1-9][0-9]*)\.(key|sign)")
_MAX_PRIVATE_FILE_SIZE = 1024


class KeyDirectoryError(InvalidParameterError):
    """A key directory or one of its files breaks a rule; the message names the file and the
    rule (and never contains private key material)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicDirectory:
    """The public half of a key directory: ``hop_keys[i]`` is hop i's public key."""

    n_hops: int
    hop_keys: tuple[PublicKey, ...]
    analyzer_key: PublicKey
    verify_keys: Mapping[str, bytes] = field(default_factory=dict)
    """The Ed25519 verify keys by signer ("hop-<i>", "analyzer", "coordinator"); empty for a
    version 1 directory (made before signing keys)."""

    def verify_key(self, signer: str) -> bytes:
        """The 32-byte Ed25519 verify key of ``signer``; KeyDirectoryError if the directory has
        none (a version 1 directory, or an unknown signer)."""
        key = self.verify_keys.get(signer)
        if key is None:
            raise KeyDirectoryError(
                f"the key directory has no signing key for {signer} (made before signing keys? "
                f"run `shuffledp keys init --overwrite` to add them)"
            )
        return key

    def stage_key(self, stage: str) -> PublicKey:
        """The public key of ``stage`` ("hop-<i>" with 0 <= i < n_hops, or "analyzer");
        KeyDirectoryError for any other name."""
        index = _stage_index(stage)
        if index is None:
            return self.analyzer_key
        if index >= self.n_hops:
            raise KeyDirectoryError(
                f"stage must be one of hop-0..hop-{self.n_hops - 1} or analyzer "
                f"(n_hops = {self.n_hops}), got {stage!r}"
            )
        return self.hop_keys[index]


def stage_names(n_hops: int) -> tuple[str, ...]:
    """("hop-0", ..., "hop-{n_hops-1}", "analyzer"): the stages of a directory with ``n_hops``
    hops, in onion order. InvalidParameterError unless n_hops is an integer in [1, MAX_HOPS]."""
    require_int("n_hops", n_hops, 1, MAX_HOPS)
    return (*(f"hop-{i}" for i in range(n_hops)), ANALYZER_STAGE)


def public_file_path(directory: str | os.PathLike[str]) -> Path:
    """Path of ``public.json`` in ``directory`` (no file system access)."""
    return Path(directory) / PUBLIC_FILE


def private_key_path(directory: str | os.PathLike[str], stage: str) -> Path:
    """Path of ``stage``'s private key file (``<stage>.key``) in ``directory`` (no file system
    access). KeyDirectoryError unless ``stage`` is "hop-<i>" (i a non-negative integer written
    without leading zeros) or "analyzer"."""
    _stage_index(stage, directory)
    return Path(directory) / f"{stage}.key"


def fingerprint(key: PublicKey) -> str:
    """The first FINGERPRINT_LENGTH (16) lowercase hex characters of ``key``: enough to tell keys
    apart by eye, not to authenticate one."""
    return public_key_to_bytes(key).hex()[:FINGERPRINT_LENGTH]


def init_key_directory(
    directory: str | os.PathLike[str], *, hops: int, overwrite: bool = False
) -> PublicDirectory:
    """Create a key directory with ``hops`` hops and return its public half.

    Guarantees, on return:

    - ``directory`` exists (created with mode 0700 if it was missing, parents as ``mkdir -p``);
    - each private key file holds a fresh key from the OS CSPRNG (``generate_keypair``), all
      H + 1 public keys distinct, and has mode exactly 0600; it is created with
      ``O_CREAT | O_EXCL | O_WRONLY`` and mode 0600 (then ``fchmod`` to 0600 in case the umask
      removed bits), so it is never readable by group or others, nor written through a symlink
      planted at its name; its data are fsynced before the next file is written;
    - ``public.json`` is written last, mode exactly 0644, so a reader that finds it finds the
      private keys it describes; ``load_public_directory`` and ``load_private_key`` accept the
      result.

    Raises InvalidParameterError unless ``hops`` is an integer in [1, MAX_HOPS] (nothing is
    touched), and KeyDirectoryError if ``directory`` is not a directory or already holds
    ``public.json``, ``analyzer.key`` or any ``hop-<i>.key`` and ``overwrite`` is false (nothing is
    written). With ``overwrite``, each file is replaced atomically (new content written to a fresh
    0600/0644 temporary file, fsynced, then renamed over the old one) and ``hop-<i>.key`` files
    with i >= hops, left by an earlier initialization with more hops, are removed. If writing
    fails midway without ``overwrite``, the files this call created are removed again.
    """
    require_int("hops", hops, 1, MAX_HOPS)
    root = Path(directory)
    _make_directory(root)
    public_path = public_file_path(root)
    stages = stage_names(hops)
    targets = [private_key_path(root, stage) for stage in stages]
    signers = [*stages, COORDINATOR]
    sign_targets = [signing_key_path(root, signer) for signer in signers]
    stale = sorted(_hop_files(root) - set(targets) - set(sign_targets))
    if not overwrite:
        _refuse_existing([public_path, *targets, *sign_targets, *stale])
    keys = _distinct_private_keys(len(targets))
    public_keys = [key.public_key for key in keys]
    signing = [SigningKey.generate() for _ in signers]  # libsodium randombytes: the OS CSPRNG
    verify_keys = {
        signer: bytes(key.verify_key) for signer, key in zip(signers, signing, strict=True)
    }
    files = [
        (path, (private_key_to_bytes(key).hex() + "\n").encode("ascii"), PRIVATE_FILE_MODE)
        for path, key in zip(targets, keys, strict=True)
    ]
    files += [
        (path, (bytes(key).hex() + "\n").encode("ascii"), PRIVATE_FILE_MODE)
        for path, key in zip(sign_targets, signing, strict=True)
    ]
    files.append((public_path, _public_document(public_keys, verify_keys), PUBLIC_FILE_MODE))
    _write_files(files, replace=overwrite)
    _remove_stale_hop_files(stale, hops)
    _fsync_directory(root)
    return PublicDirectory(
        n_hops=hops,
        hop_keys=tuple(public_keys[:-1]),
        analyzer_key=public_keys[-1],
        verify_keys=verify_keys,
    )


def signing_key_path(directory: str | os.PathLike[str], signer: str) -> Path:
    """Path of ``signer``'s Ed25519 signing key file (``<signer>.sign``): a stage name or
    "coordinator" (no file system access)."""
    if signer != COORDINATOR:
        _stage_index(signer, directory)
    return Path(directory) / f"{signer}{SIGN_SUFFIX}"


def _refuse_existing(paths: Sequence[Path]) -> None:
    """KeyDirectoryError naming the first of ``paths`` that exists (a symlink counts)."""
    for path in paths:
        if os.path.lexists(path):
            raise KeyDirectoryError(
                f"{path}: key directory file already exists (--overwrite replaces the keys)"
            )


def _distinct_private_keys(count: int) -> list[PrivateKey]:
    """``count`` fresh private keys from the OS CSPRNG whose public keys are pairwise distinct
    (a repeat is astronomically unlikely; loading refuses one, so one is drawn again)."""
    keys: list[PrivateKey] = []
    seen: set[bytes] = set()
    while len(keys) < count:
        pair = generate_keypair()
        public_bytes = public_key_to_bytes(pair.public)
        if public_bytes not in seen:
            seen.add(public_bytes)
            keys.append(pair.private)
    return keys


def _public_document(public_keys: Sequence[PublicKey], verify_keys: Mapping[str, bytes]) -> bytes:
    """The content of ``public.json`` for the hops' public keys then the analyzer's, and the
    signers' verify keys."""
    document = {
        "format": FORMAT,
        "version": VERSION,
        "n_hops": len(public_keys) - 1,
        "hops": [public_key_to_bytes(key).hex() for key in public_keys[:-1]],
        "analyzer": public_key_to_bytes(public_keys[-1]).hex(),
        "signing": {signer: key.hex() for signer, key in verify_keys.items()},
    }
    return (json.dumps(document, indent=2) + "\n").encode("ascii")


def _remove_stale_hop_files(stale: Sequence[Path], hops: int) -> None:
    """Remove the ``hop-<i>.key`` files with i >= ``hops`` that an earlier initialization with
    more hops left; KeyDirectoryError naming one that cannot be removed."""
    for path in stale:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise KeyDirectoryError(
                f"{path}: stale private key file (hops >= {hops}) must be removed, cannot: "
                f"{exc.strerror}"
            ) from None


def load_public_directory(directory: str | os.PathLike[str]) -> PublicDirectory:
    """The public keys of ``directory``, read from its ``public.json``.

    Guarantees that the result has 1 <= n_hops <= MAX_HOPS, exactly n_hops hop keys, and n_hops + 1
    pairwise distinct public keys, each of which one can seal to (no low-order point). Raises
    KeyDirectoryError, naming the file and the rule, if the file is missing or unreadable, is not a
    UTF-8 JSON object, has a format other than "shuffledp-keys" or a version other than 1, if
    n_hops is not an integer in [1, MAX_HOPS], if len(hops) != n_hops, if a key is not a string of
    64 hex characters or is refused by ``public_key_from_bytes``, or if two keys are equal.
    """
    path = public_file_path(directory)
    document = _read_public_document(path)
    n_hops = _document_n_hops(path, document)
    hops = document.get("hops")
    if not isinstance(hops, list):
        raise KeyDirectoryError(
            f"{path}: hops must be a list of {n_hops} hex public keys, got {type(hops).__name__}"
        )
    if len(hops) != n_hops:
        raise KeyDirectoryError(
            f"{path}: hops must hold n_hops = {n_hops} public keys, got {len(hops)}"
        )
    hop_keys = tuple(_public_key(path, f"hops[{i}]", value) for i, value in enumerate(hops))
    analyzer_key = _public_key(path, "analyzer", document.get("analyzer"))
    _require_distinct(path, [*hop_keys, analyzer_key])
    verify_keys = _verify_keys(path, document, n_hops) if document["version"] >= 2 else {}
    return PublicDirectory(
        n_hops=n_hops, hop_keys=hop_keys, analyzer_key=analyzer_key, verify_keys=verify_keys
    )


def _verify_keys(path: Path, document: dict[str, Any], n_hops: int) -> dict[str, bytes]:
    """The ``signing`` object of a version 2 document: one 64-hex-character Ed25519 verify key
    per stage and the coordinator, pairwise distinct; KeyDirectoryError naming the field."""
    signing = document.get("signing")
    signers = [*stage_names(n_hops), COORDINATOR]
    if not isinstance(signing, dict) or sorted(signing) != sorted(signers):
        raise KeyDirectoryError(
            f"{path}: signing must map exactly {', '.join(signers)} to verify keys, got "
            f"{sorted(signing) if isinstance(signing, dict) else type(signing).__name__}"
        )
    keys: dict[str, bytes] = {}
    for signer in signers:
        value = signing[signer]
        if not isinstance(value, str) or not _HEX_KEY.fullmatch(value):
            raise KeyDirectoryError(
                f"{path}: signing.{signer} must be a string of {2 * KEY_SIZE} hex characters, "
                f"got {value!r:.80}"
            )
        keys[signer] = bytes.fromhex(value)
    if len(set(keys.values())) != len(keys):
        raise KeyDirectoryError(f"{path}: signing keys must be pairwise distinct, they are not")
    return keys


def load_signing_key(directory: str | os.PathLike[str], signer: str) -> SigningKey:
    """``signer``'s Ed25519 signing key from ``<signer>.sign`` (a stage name or
    "coordinator"), checked like a private key file (mode 0600, exactly 64 hex characters) and
    against the verify key ``public.json`` publishes for it; KeyDirectoryError naming the file
    otherwise (never its content)."""
    path = signing_key_path(directory, signer)
    expected = load_public_directory(directory).verify_key(signer)
    key = SigningKey(_read_hex_key(path, "signing key"))
    if bytes(key.verify_key) != expected:
        raise KeyDirectoryError(
            f"{path}: signing key must match the verify key published for {signer} in "
            f"{public_file_path(directory)} ({expected.hex()[:FINGERPRINT_LENGTH]}...), it does "
            f"not (mixed-up key directory?)"
        )
    return key


def _read_public_document(path: Path) -> dict[str, Any]:
    """The JSON object of the public key file ``path``; KeyDirectoryError naming the file if it
    is missing, unreadable, not UTF-8 JSON or not an object."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise KeyDirectoryError(
            f"{path}: public key file must exist, it does not (create the directory with "
            f"`shuffledp keys init`)"
        ) from None
    except OSError as exc:
        raise KeyDirectoryError(
            f"{path}: public key file must be readable: {exc.strerror}"
        ) from None
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise KeyDirectoryError(f"{path}: public key file must be UTF-8 JSON: {exc}") from None
    if not isinstance(document, dict):
        raise KeyDirectoryError(
            f"{path}: public key file must hold a JSON object, got {type(document).__name__}"
        )
    return document


def _document_n_hops(path: Path, document: dict[str, Any]) -> int:
    """The ``n_hops`` of a public key document after its format and version are checked;
    KeyDirectoryError naming the file and the field for any of the three."""
    fmt = document.get("format")
    if fmt != FORMAT:
        raise KeyDirectoryError(f"{path}: format must be {FORMAT!r}, got {fmt!r}")
    version = document.get("version")
    if (
        isinstance(version, bool)
        or not isinstance(version, int)
        or version not in READABLE_VERSIONS
    ):
        raise KeyDirectoryError(
            f"{path}: version must be one of {', '.join(map(str, READABLE_VERSIONS))}, got "
            f"{version!r}"
        )
    n_hops: Any = document.get("n_hops")
    try:
        require_int("n_hops", n_hops, 1, MAX_HOPS)
    except InvalidParameterError as exc:
        raise KeyDirectoryError(f"{path}: {exc}") from None
    assert isinstance(n_hops, int)
    return n_hops


def _require_distinct(path: Path, keys: Sequence[PublicKey]) -> None:
    """KeyDirectoryError naming the first key (hops[i], then the analyzer's, the last of
    ``keys``) that equals an earlier one."""
    names = [f"hops[{i}]" for i in range(len(keys) - 1)] + ["analyzer"]
    first_with: dict[bytes, str] = {}
    for name, key in zip(names, keys, strict=True):
        raw_key = public_key_to_bytes(key)
        if raw_key in first_with:
            raise KeyDirectoryError(
                f"{path}: public keys must be distinct, {name} equals {first_with[raw_key]} "
                f"({fingerprint(key)}...)"
            )
        first_with[raw_key] = name


def load_private_key(directory: str | os.PathLike[str], stage: str) -> PrivateKey:
    """The private key of ``stage`` ("hop-<i>" or "analyzer") from ``<stage>.key`` in
    ``directory``.

    Guarantees that the key's public key is the one ``public.json`` publishes for ``stage``, so
    what clients seal to that stage opens with it. Raises KeyDirectoryError, naming the file and
    the rule, if ``stage`` is not a valid name or not a stage of this directory (hop index >=
    n_hops), if ``public.json`` is invalid (see ``load_public_directory``), if the key file is
    missing, unreadable or not a regular file, if (on POSIX) its mode grants any group or other
    permission (fix: ``chmod 600``), if its content is not exactly 64 hex characters (surrounding
    whitespace allowed), or if its public key differs from the published one (a mixed-up
    directory). Messages never contain the file's content.
    """
    path = private_key_path(directory, stage)
    published = load_public_directory(directory)
    try:
        expected = published.stage_key(stage)
    except KeyDirectoryError as exc:
        raise KeyDirectoryError(f"{public_file_path(directory)}: {exc}") from None
    key = private_key_from_bytes(_read_hex_key(path, "private key"))
    if public_key_to_bytes(key.public_key) != public_key_to_bytes(expected):
        raise KeyDirectoryError(
            f"{path}: private key must match the public key published for {stage} in "
            f"{public_file_path(directory)} ({fingerprint(expected)}...), its public key is "
            f"{fingerprint(key.public_key)}... (mixed-up key directory?)"
        )
    return key


def load_hop_key(directory: str | os.PathLike[str], index: int) -> PrivateKey:
    """``load_private_key(directory, f"hop-{index}")``; InvalidParameterError unless ``index``
    is an integer in [0, MAX_HOPS - 1]."""
    require_int("hop index", index, 0, MAX_HOPS - 1)
    return load_private_key(directory, f"hop-{index}")


def load_analyzer_key(directory: str | os.PathLike[str]) -> PrivateKey:
    """``load_private_key(directory, "analyzer")``."""
    return load_private_key(directory, ANALYZER_STAGE)


def _stage_index(stage: object, directory: str | os.PathLike[str] | None = None) -> int | None:
    """The hop index of a stage name, None for the analyzer; KeyDirectoryError for a bad name."""
    match = _STAGE.fullmatch(stage) if isinstance(stage, str) else None
    if match is None:
        where = f"{directory}: " if directory is not None else ""
        raise KeyDirectoryError(
            f"{where}stage must be 'hop-<i>' (i >= 0, no leading zeros) or 'analyzer', "
            f"got {stage!r}"
        )
    return None if match.group(1) is None else int(match.group(1))


def _public_key(path: Path, name: str, value: Any) -> PublicKey:
    if not isinstance(value, str) or not _HEX_KEY.fullmatch(value):
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise KeyDirectoryError(
            f"{path}: {name} must be a string of {2 * KEY_SIZE} hex characters, got {shown}"
        )
    try:
        return public_key_from_bytes(bytes.fromhex(value))
    except InvalidParameterError as exc:
        raise KeyDirectoryError(f"{path}: {name}: {exc}") from None


def _read_hex_key(path: Path, what: str) -> bytes:
    """The 32 bytes of a key file holding exactly 64 hex characters (surrounding whitespace
    allowed), read as a private file (:func:`_read_private_file`); KeyDirectoryError naming the
    file and ``what`` it holds otherwise, never its content."""
    data = _read_private_file(path)
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        text = None
    if text is None or not _HEX_KEY.fullmatch(text):
        raise KeyDirectoryError(
            f"{path}: {what} file must hold exactly {2 * KEY_SIZE} hex characters "
            f"(surrounding whitespace allowed), it does not ({len(data)} bytes)"
        )
    return bytes.fromhex(text)


def _read_private_file(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise KeyDirectoryError(
            f"{path}: private key file must exist, it does not (copy it from the machine that "
            f"ran `shuffledp keys init`)"
        ) from None
    except OSError as exc:
        raise KeyDirectoryError(
            f"{path}: private key file must be readable: {exc.strerror}"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise KeyDirectoryError(f"{path}: private key file must be a regular file")
        mode = stat.S_IMODE(info.st_mode)
        if os.name == "posix" and mode & 0o077:
            raise KeyDirectoryError(
                f"{path}: private key file must have mode 0600 (no group or other access), got "
                f"{mode:04o}; run `chmod 600 {path}`"
            )
        chunks: list[bytes] = []
        size = 0
        while size <= _MAX_PRIVATE_FILE_SIZE:
            chunk = os.read(fd, _MAX_PRIVATE_FILE_SIZE + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise KeyDirectoryError(
            f"{path}: private key file must be readable: {exc.strerror}"
        ) from None
    finally:
        os.close(fd)
    if size > _MAX_PRIVATE_FILE_SIZE:
        raise KeyDirectoryError(
            f"{path}: private key file must hold exactly {2 * KEY_SIZE} hex characters "
            f"(surrounding whitespace allowed), it is larger than {_MAX_PRIVATE_FILE_SIZE} bytes"
        )
    return b"".join(chunks)


def _make_directory(root: Path) -> None:
    if os.path.lexists(root) and not root.is_dir():
        raise KeyDirectoryError(f"{root}: key directory must be a directory, it is not")
    if root.is_dir():
        return
    try:
        root.mkdir(mode=DIRECTORY_MODE, parents=True)
        os.chmod(root, DIRECTORY_MODE)
    except FileExistsError:
        if not root.is_dir():
            raise KeyDirectoryError(
                f"{root}: key directory must be a directory, it is not"
            ) from None
    except OSError as exc:
        raise KeyDirectoryError(
            f"{root}: key directory cannot be created: {exc.strerror}"
        ) from None


def _hop_files(root: Path) -> set[Path]:
    """The ``hop-<i>.key`` files present in ``root`` (any i)."""
    try:
        names = os.listdir(root)
    except OSError as exc:
        raise KeyDirectoryError(f"{root}: key directory must be readable: {exc.strerror}") from None
    return {root / name for name in names if _HOP_FILE.fullmatch(name)}


def _write_file(path: Path, data: bytes, mode: int, *, replace: bool) -> None:
    """Write ``data`` to ``path`` with permissions exactly ``mode``, never wider at any moment.

    Without ``replace``: create ``path`` itself with O_EXCL (KeyDirectoryError if it exists).
    With ``replace``: create a fresh temporary file next to it with O_EXCL, then rename it over
    ``path`` (atomic: readers see the old or the new content, never a mix).
    """
    target = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp") if replace else path
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(target, flags, mode)
    except FileExistsError:
        raise KeyDirectoryError(
            f"{path}: key directory file already exists (--overwrite replaces the keys)"
        ) from None
    except OSError as exc:
        raise KeyDirectoryError(f"{target}: cannot create file: {exc.strerror}") from None
    try:
        try:
            if os.name == "posix":
                os.fchmod(fd, mode)  # the umask may have removed bits; never adds any beyond mode
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(target, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            target.unlink()
        if isinstance(exc, OSError):
            raise KeyDirectoryError(f"{path}: cannot write file: {exc.strerror}") from None
        raise


def _write_files(files: Sequence[tuple[Path, bytes, int]], *, replace: bool) -> None:
    """:func:`_write_file` for each (path, data, mode), in order. Without ``replace``, a
    failure (or an interruption) removes the files this call had created, so that a retry does
    not stop at "already exists" for half a set of keys."""
    created: list[Path] = []
    try:
        for path, data, mode in files:
            _write_file(path, data, mode, replace=replace)
            created.append(path)
    except BaseException:
        if not replace:
            for path in created:
                with contextlib.suppress(OSError):
                    path.unlink()
        raise


def _fsync_directory(root: Path) -> None:
    """Make the new directory entries durable (best effort: not every platform can)."""
    if os.name != "posix":
        return
    with contextlib.suppress(OSError):
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
