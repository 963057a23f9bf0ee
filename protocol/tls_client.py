"""The client side of TLS: the SSL contexts a component uses to connect to a broker.

Kept in the protocol layer (plain ``ssl`` plus one certificate parse) so that connecting never
needs the key and certificate management of :mod:`shuffledp.security.tls`, which writes them.
"""

from __future__ import annotations

import os
import ssl
import stat
from pathlib import Path

from shuffledp.errors import InvalidParameterError

#: Largest CA file read (a bundle of a few hundred certificates fits easily).
MAX_CA_FILE_BYTES = 4 * 1024 * 1024
_PEM_CERTIFICATE = "-----BEGIN CERTIFICATE-----"


class TlsError(InvalidParameterError):
    """A TLS file or parameter breaks a rule; the message names the file (or the value) and the
    rule, never key material."""


def client_tls_context(ca_file: str | os.PathLike[str]) -> ssl.SSLContext:
    """A client-side SSL context that trusts only the certificates in ``ca_file`` (PEM), requires
    the server's certificate to verify against them and to name the host connected to
    (``check_hostname``), and refuses TLS below 1.2.

    TlsError naming the file and the rule if it is missing, not a regular file, unreadable,
    larger than MAX_CA_FILE_BYTES, not text, holds a private key (``ca.key`` passed for
    ``ca.pem``: the message does not show it), holds no PEM certificate, or holds one that does
    not parse."""
    path = Path(ca_file)
    pem = _read_ca_file(path)
    try:
        # With cadata given, create_default_context loads nothing else: no system store.
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=pem)
    except ssl.SSLError as exc:  # parsed by cryptography already; OpenSSL may still refuse one
        raise TlsError(
            f"{path}: CA file must hold PEM certificates OpenSSL accepts, it does not "
            f"({exc.reason or exc})"
        ) from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def system_tls_context() -> ssl.SSLContext:
    """A client-side SSL context with the system's default trust store (for a broker with a
    publicly trusted certificate), host name checking, and TLS >= 1.2."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _read_ca_file(path: Path) -> str:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise TlsError(
            f"{path}: CA file must exist, it does not (`shuffledp keys init DIR --tls` writes "
            f"DIR/tls/ca.pem)"
        ) from None
    except OSError as exc:
        raise TlsError(f"{path}: CA file must be readable: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise TlsError(f"{path}: CA file must be a regular file, it is not")
    if info.st_size > MAX_CA_FILE_BYTES:
        raise TlsError(
            f"{path}: CA file must be at most {MAX_CA_FILE_BYTES} bytes, it has {info.st_size}"
        )
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TlsError(f"{path}: CA file must be readable: {exc.strerror}") from None
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise TlsError(
            f"{path}: CA file must be PEM text (-----BEGIN CERTIFICATE----- blocks), it is "
            f"binary ({len(raw)} bytes; a DER certificate converts with `openssl x509 -inform "
            f"der`)"
        ) from None
    if "PRIVATE KEY-----" in text:
        raise TlsError(
            f"{path}: CA file must hold certificates only, it holds a private key (pass ca.pem, "
            f"not ca.key; and keep that key file private)"
        )
    if _PEM_CERTIFICATE not in text:
        raise TlsError(
            f"{path}: CA file must hold at least one PEM certificate "
            f"({_PEM_CERTIFICATE} block), it holds none"
        )
    try:
        # Imported here: cryptography takes ~0.1 s to load and plain connections never need it.
        from cryptography import x509

        x509.load_pem_x509_certificates(raw)
    except ValueError as exc:
        raise TlsError(f"{path}: CA file must hold valid PEM certificates: {exc}") from None
    return text
