"""TLS to an external broker: a private certificate authority, the broker's certificate, and the
SSL context a component verifies the broker with.

Why: over ``mqtt://`` the broker passwords (:mod:`shuffledp.security.access`), the topics and the
ciphertexts cross the network in the clear, so anyone on the path can log in as any component
or watch the traffic per connection. Over ``mqtts://`` (TLS >= 1.2) they are encrypted, and a
component talks only to a broker holding a certificate signed by the deployment's CA.

``init_tls(DIR, hosts=...)`` (run by ``shuffledp keys init --tls``) writes ``DIR/tls/``:

- ``ca.pem`` (0644): the self-signed certificate of a private CA made for this deployment only.
  Every component gets it (``--tls-ca DIR/tls/ca.pem``) and trusts nothing else.
- ``ca.key`` (0600): the CA's private key. Nothing at run time needs it (it could sign another
  broker certificate); keep it off the broker and component machines.
- ``server.pem`` (0644): the broker's certificate, signed by the CA, valid for exactly the host
  names and IP addresses given (subject alternative names: TLS clients check the name they
  connected to against these, never against the subject's common name).
- ``server.key`` (0600): the broker's private key; it belongs on the broker's machine only.

Parameters, and why:

- Keys: ECDSA on P-256 with SHA-256 signatures: 128-bit security, supported by every TLS 1.2
  and 1.3 stack (Mosquitto's OpenSSL included), and with ECDHE key exchange forward secret
  without Diffie-Hellman parameter files.
- CA: basicConstraints CA:true with pathLen 0 (it can sign server certificates, not another CA)
  and keyUsage keyCertSign and cRLSign, both critical. Server certificate: basicConstraints
  CA:false, keyUsage digitalSignature (what an ECDSA key does in a TLS handshake) and
  extendedKeyUsage serverAuth, so it cannot pose as a CA or as a client. Subject and authority
  key identifiers on both (strict X.509 verifiers, such as Python >= 3.13's default, require
  them).
- Validity: :data:`VALIDITY_DAYS` = 825 days from 5 minutes before creation (for clocks a little
  behind): the longest validity Apple platforms accept for a TLS server certificate, also from
  a private CA. Renew with ``shuffledp keys init DIR --tls --overwrite`` (new keys throughout).
- Serial numbers: 159 random bits from ``os.urandom`` (the OS CSPRNG), as
  ``cryptography.x509.random_serial_number`` draws them: positive and within RFC 5280's 20
  octets; unpredictable serials are what CAs use against chosen-prefix collisions.

Files are written like the key directory's (:func:`shuffledp.security.keys._write_file`): created with
O_EXCL at their final mode (never wider at any moment), fsynced; with ``overwrite`` each is
written to a fresh temporary file and renamed over the old one (atomic for readers). Without
``overwrite`` nothing is written if any of the four files exists.

Every problem raises :class:`TlsError` (an InvalidParameterError) whose message names the file
and the rule (a file that cannot be written: the key directory's KeyDirectoryError, also naming
it); no message ever contains key material.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from shuffledp.protocol.tls_client import MAX_CA_FILE_BYTES as MAX_CA_FILE_BYTES
from shuffledp.protocol.tls_client import TlsError as TlsError
from shuffledp.protocol.tls_client import client_tls_context as client_tls_context
from shuffledp.protocol.tls_client import system_tls_context as system_tls_context
from shuffledp.security.access import (
    MOSQUITTO_DELIVERY_SETTINGS,
    MOSQUITTO_LISTENER_ACCOUNT_SETTINGS,
    access_directory,
    installed_bounds_plugin,
    mosquitto_auth_settings,
    mosquitto_persistence_settings,
)
from shuffledp.security.broker_limits import deployment_client_payload
from shuffledp.security.keys import (
    DIRECTORY_MODE,
    PRIVATE_FILE_MODE,
    PUBLIC_FILE_MODE,
    _fsync_directory,
    _make_directory,
    _write_file,
    _write_files,
)
from shuffledp.security.mosquitto_bounds import bounds_settings

__all__ = [
    "CA_CERT_FILE",
    "CA_KEY_FILE",
    "DEFAULT_TLS_HOSTS",
    "MOSQUITTO_TLS_PORT",
    "SERVER_CERT_FILE",
    "SERVER_KEY_FILE",
    "TLS_DIR",
    "VALIDITY_DAYS",
    "TlsError",
    "TlsFiles",
    "check_tls_absent",
    "client_tls_context",
    "init_tls",
    "mosquitto_tls_listener",
    "system_tls_context",
    "tls_directory",
    "tls_hosts",
    "write_mosquitto_tls_config",
]

TLS_DIR = "tls"
CA_CERT_FILE = "ca.pem"
CA_KEY_FILE = "ca.key"
SERVER_CERT_FILE = "server.pem"
SERVER_KEY_FILE = "server.key"
MOSQUITTO_TLS_CONFIG = "mosquitto-tls.conf"
#: The IANA port of MQTT over TLS.
MOSQUITTO_TLS_PORT = 8883
DEFAULT_TLS_HOSTS = ("localhost", "127.0.0.1")
#: The longest validity Apple platforms accept for a TLS server certificate (module docstring).
VALIDITY_DAYS = 825
#: How far before "now" a new certificate becomes valid: for peers whose clock is a little behind.
BACKDATE = datetime.timedelta(minutes=5)
MAX_HOSTS = 100
#: A CA file larger than this is refused (the whole Mozilla bundle is about 220 KB).

_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
#: Private keys first, ca.pem last: a reader that finds ca.pem finds what it certifies.
_WRITE_ORDER = (CA_KEY_FILE, SERVER_KEY_FILE, SERVER_CERT_FILE, CA_CERT_FILE)


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsFiles:
    """What :func:`init_tls` wrote: the four paths, the server certificate's host names and IP
    addresses, and the SHA-256 fingerprint of the CA certificate (lowercase hex of its DER
    encoding, what ``openssl x509 -fingerprint -sha256`` shows with colons), by which an
    operator can check a copied ``ca.pem``."""

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    hosts: tuple[str, ...]
    ca_fingerprint: str


def tls_directory(directory: str | os.PathLike[str]) -> Path:
    """``directory/tls`` (no file system access)."""
    return Path(directory) / TLS_DIR


def tls_hosts(hosts: Iterable[str] | None) -> tuple[str, ...]:
    """The server certificate's names, checked and in canonical form: ``hosts`` or, if None,
    :data:`DEFAULT_TLS_HOSTS`; IP addresses (IPv4 or IPv6, without brackets) in their compressed
    form, DNS names in lower case; repeats dropped, order kept.

    TlsError naming the value unless each host is an IP address or a DNS name (labels of 1..63
    letters, digits and inner hyphens, separated by dots, 253 characters at most, not all
    digits: "1.2.3" would read as an address), and unless there are 1..MAX_HOSTS of them."""
    if hosts is None:
        hosts = DEFAULT_TLS_HOSTS
    if isinstance(hosts, str):
        raise TlsError(f"TLS hosts must be a list of host names, got the string {hosts!r}")
    result: list[str] = []
    for host in hosts:
        canonical = _canonical_host(host)
        if canonical not in result:
            result.append(canonical)
    if not 1 <= len(result) <= MAX_HOSTS:
        raise TlsError(f"TLS hosts must number 1..{MAX_HOSTS}, got {len(result)}")
    return tuple(result)


def _canonical_host(host: object) -> str:
    if not isinstance(host, str):
        raise TlsError(f"a TLS host must be a string, got {host!r}")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    name = host.lower().removesuffix(".")
    labels = name.split(".")
    if (
        not name
        or len(name) > 253
        or not all(_LABEL.fullmatch(label) for label in labels)
        or name.replace(".", "").isdigit()
    ):
        raise TlsError(
            f"a TLS host must be an IP address or a DNS name (labels of 1..63 letters, digits "
            f"and inner hyphens, at most 253 characters, not all digits), got {host!r}"
        )
    return name


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def init_tls(
    directory: str | os.PathLike[str],
    *,
    hosts: Iterable[str] | None = None,
    overwrite: bool = False,
) -> TlsFiles:
    """Write a fresh CA and a server certificate for ``hosts`` (default localhost and
    127.0.0.1) into ``directory/tls/`` (module docstring) and return what was written.

    ``directory/tls`` is created with mode 0700 if missing (``directory`` too). TlsError for bad
    hosts (nothing is touched) and, naming the file, if one of the four files or
    ``access/mosquitto-tls.conf`` exists and ``overwrite`` is false (nothing is written);
    KeyDirectoryError naming the file if one cannot be written (without ``overwrite``, the files
    this call created are removed again). The private keys are written
    first and ``ca.pem`` last, so a reader that finds ``ca.pem`` finds everything it certifies.
    """
    names = tls_hosts(hosts)
    root = _make_tls_directory(directory)
    check_tls_absent(directory, overwrite=overwrite)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    server_key = ec.generate_private_key(ec.SECP256R1())
    not_before = datetime.datetime.now(datetime.UTC) - BACKDATE
    ca_cert = _ca_certificate(ca_key, not_before)
    server_cert = _server_certificate(server_key, names, ca_key=ca_key, not_before=not_before)
    contents = {
        CA_KEY_FILE: (_private_pem(ca_key), PRIVATE_FILE_MODE),
        SERVER_KEY_FILE: (_private_pem(server_key), PRIVATE_FILE_MODE),
        SERVER_CERT_FILE: (server_cert.public_bytes(serialization.Encoding.PEM), PUBLIC_FILE_MODE),
        CA_CERT_FILE: (ca_cert.public_bytes(serialization.Encoding.PEM), PUBLIC_FILE_MODE),
    }
    paths = {name: root / name for name in _WRITE_ORDER}
    _write_files([(path, *contents[name]) for name, path in paths.items()], replace=overwrite)
    _fsync_directory(root)
    return TlsFiles(
        ca_cert=paths[CA_CERT_FILE],
        ca_key=paths[CA_KEY_FILE],
        server_cert=paths[SERVER_CERT_FILE],
        server_key=paths[SERVER_KEY_FILE],
        hosts=names,
        ca_fingerprint=ca_cert.fingerprint(hashes.SHA256()).hex(),
    )


def _make_tls_directory(directory: str | os.PathLike[str]) -> Path:
    """``directory/tls``, created with mode 0700 if missing (``directory`` too, like a key
    directory); TlsError naming it if it is not a directory or cannot be created."""
    root = tls_directory(directory)
    _make_directory(Path(directory))
    if os.path.lexists(root) and not root.is_dir():
        raise TlsError(f"{root}: TLS directory must be a directory, it is not")
    if not root.is_dir():
        try:
            root.mkdir(mode=DIRECTORY_MODE)
            os.chmod(root, DIRECTORY_MODE)  # the umask may have removed bits
        except OSError as exc:
            raise TlsError(f"{root}: TLS directory cannot be created: {exc.strerror}") from None
    return root


def _ca_name(ca_key: ec.EllipticCurvePrivateKey) -> x509.Name:
    """The CA's subject. Its common name carries the start of the CA's key identifier: two
    deployments' CAs never share a name."""
    key_id = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "shuffledp"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"shuffledp CA {key_id.digest.hex()[:16]}"),
        ]
    )


def _certificate_builder(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    *,
    ca_key: ec.EllipticCurvePrivateKey,
    not_before: datetime.datetime,
) -> x509.CertificateBuilder:
    """A certificate of ``public_key`` for ``subject``, issued by the CA of ``ca_key``: a fresh
    random serial number, valid :data:`VALIDITY_DAYS` days from ``not_before``, with the basic
    constraints and key usage still to add, then the key identifiers (:func:`_key_identifiers`)."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(_ca_name(ca_key))
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_before + datetime.timedelta(days=VALIDITY_DAYS))
    )


def _key_identifiers(
    builder: x509.CertificateBuilder,
    public_key: ec.EllipticCurvePublicKey,
    ca_key: ec.EllipticCurvePrivateKey,
) -> x509.CertificateBuilder:
    """``builder`` with the subject key identifier of ``public_key`` and the authority key
    identifier of ``ca_key`` (strict X.509 verifiers require both)."""
    ca_key_id = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    return builder.add_extension(
        x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False
    ).add_extension(
        x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_key_id), critical=False
    )


def _key_usage(
    *, digital_signature: bool = False, key_cert_sign: bool = False, crl_sign: bool = False
) -> x509.KeyUsage:
    """The keyUsage extension with only the named usages set."""
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _ca_certificate(
    ca_key: ec.EllipticCurvePrivateKey, not_before: datetime.datetime
) -> x509.Certificate:
    """The CA's self-signed certificate: CA:true with pathLen 0, keyCertSign and cRLSign."""
    public_key = ca_key.public_key()
    builder = (
        _certificate_builder(_ca_name(ca_key), public_key, ca_key=ca_key, not_before=not_before)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(key_cert_sign=True, crl_sign=True), critical=True)
    )
    return _key_identifiers(builder, public_key, ca_key).sign(ca_key, hashes.SHA256())


def _server_certificate(
    server_key: ec.EllipticCurvePrivateKey,
    hosts: tuple[str, ...],
    *,
    ca_key: ec.EllipticCurvePrivateKey,
    not_before: datetime.datetime,
) -> x509.Certificate:
    """The broker's certificate for ``hosts`` (its subject alternative names), signed by the
    CA: CA:false, digitalSignature, serverAuth only."""
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "shuffledp"),
            x509.NameAttribute(NameOID.COMMON_NAME, "shuffledp broker"),
        ]
    )
    public_key = server_key.public_key()
    builder = (
        _certificate_builder(subject, public_key, ca_key=ca_key, not_before=not_before)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([_general_name(host) for host in hosts]), critical=False
        )
    )
    return _key_identifiers(builder, public_key, ca_key).sign(ca_key, hashes.SHA256())


def check_tls_absent(directory: str | os.PathLike[str], *, overwrite: bool) -> None:
    """TlsError naming the first of ``directory``'s TLS files (the four of ``tls/`` and
    ``access/mosquitto-tls.conf``) that exists, unless ``overwrite``: what :func:`init_tls`
    checks first, for a caller that must know before it writes anything else."""
    if overwrite:
        return
    root = tls_directory(directory)
    config = access_directory(directory) / MOSQUITTO_TLS_CONFIG
    for path in [*(root / name for name in _WRITE_ORDER), config]:
        if os.path.lexists(path):
            raise TlsError(
                f"{path}: TLS file already exists (--overwrite replaces the "
                f"CA and the server certificate)"
            )


def _private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """PKCS#8 PEM without a passphrase: Mosquitto reads it unattended at start and on SIGHUP;
    the file's mode 0600 is what protects it."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def mosquitto_tls_listener(
    tls_dir: str | os.PathLike[str], port: int, *, bind_address: str | None = None
) -> str:
    """Mosquitto 2.x lines for a TLS listener on ``port`` (all interfaces unless
    ``bind_address``) with the server certificate and key of ``tls_dir``, TLS >= 1.2. No client
    certificates are asked for: components authenticate with their accounts
    (:mod:`shuffledp.security.access`), over the encrypted connection."""
    root = Path(os.path.abspath(tls_dir))
    where = f"{port}" if bind_address is None else f"{port} {bind_address}"
    return (
        f"listener {where}\n"
        f"certfile {root / SERVER_CERT_FILE}\n"
        f"keyfile {root / SERVER_KEY_FILE}\n"
        "tls_version tlsv1.2\n"
    )


def write_mosquitto_tls_config(directory: str | os.PathLike[str], *, overwrite: bool) -> Path:
    """Write ``directory/access/mosquitto-tls.conf`` (0644) and return its path: the accounts
    and ACL of ``directory/access``, the per-role bounds plugin that ``init_access`` installed
    there (or comment lines saying why it is not loaded) and one TLS listener on port 8883 of every interface, with
    ``directory/tls``'s certificate. A file of its own, not a listener added to
    ``mosquitto.conf``: that one stays loopback-only and plain, and choosing this one is the
    operator's explicit step to expose the broker to the network, encrypted only.
    KeyDirectoryError if it exists and ``overwrite`` is false."""
    access = access_directory(directory)
    bounds = bounds_settings(deployment_client_payload(access), installed_bounds_plugin(access))
    text = (
        mosquitto_auth_settings(access)
        + bounds
        + MOSQUITTO_DELIVERY_SETTINGS
        + mosquitto_persistence_settings(access)
        + "# MQTT over TLS on every interface (add an address after the port to restrict it);\n"
        + "# components connect with --broker mqtts://HOST:8883 --tls-ca DIR/tls/ca.pem.\n"
        + mosquitto_tls_listener(tls_directory(directory), MOSQUITTO_TLS_PORT)
        + MOSQUITTO_LISTENER_ACCOUNT_SETTINGS
    )
    path = access / MOSQUITTO_TLS_CONFIG
    _write_file(path, text.encode(), PUBLIC_FILE_MODE, replace=overwrite)
    return path
