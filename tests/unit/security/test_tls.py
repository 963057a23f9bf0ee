"""TLS to external brokers (shuffledp.security.tls, mqtts:// in protocol/mqtt.py): the certificates, the
CA-file loader, the URL rules (Mosquitto with a TLS listener: tests/integration/test_tls_mosquitto.py)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from shuffledp.brokers.mosquitto import write_mosquitto_config
from shuffledp.cli import main
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.mqtt import (
    BrokerAddress,
    MqttTransport,
    parse_broker_address,
    parse_broker_url,
)
from shuffledp.security.tls import (
    VALIDITY_DAYS,
    TlsError,
    client_tls_context,
    init_tls,
    tls_directory,
    tls_hosts,
)
from shuffledp.simulations.pipeline.simulate import SimulationOptions

FILES = ("ca.pem", "ca.key", "server.pem", "server.key")
MODES = {"ca.pem": 0o644, "ca.key": 0o600, "server.pem": 0o644, "server.key": 0o600}


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return key


def _public_der(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


# -- certificates ------------------------------------------------------------------------------


def test_certificates_chain_to_the_ca_and_carry_exactly_the_asked_names(tmp_path: Path) -> None:
    hosts = ["Broker.Example.org", "10.0.0.5", "::1", "localhost", "broker.example.org."]
    files = init_tls(tmp_path, hosts=hosts)
    root = tls_directory(tmp_path)
    ca, server = _cert(root / "ca.pem"), _cert(root / "server.pem")

    # The server certificate's signature verifies with the CA's public key, not with another's.
    ca_public = ca.public_key()
    assert isinstance(ca_public, ec.EllipticCurvePublicKey)
    assert server.signature_hash_algorithm is not None
    ca_public.verify(
        server.signature, server.tbs_certificate_bytes, ec.ECDSA(server.signature_hash_algorithm)
    )
    other = init_tls(tmp_path / "other")
    other_public = _cert(other.ca_cert).public_key()
    assert isinstance(other_public, ec.EllipticCurvePublicKey)
    with pytest.raises(InvalidSignature):
        other_public.verify(
            server.signature,
            server.tbs_certificate_bytes,
            ec.ECDSA(server.signature_hash_algorithm),
        )

    # SANs: the hosts asked for, canonical (lower case, no trailing dot), each once.
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["broker.example.org", "localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("10.0.0.5"),
        ipaddress.ip_address("::1"),
    ]
    assert files.hosts == ("broker.example.org", "10.0.0.5", "::1", "localhost")

    # An independent X.509 path validator (cryptography's, not OpenSSL's) accepts the chain
    # for every name in the SAN and refuses a name outside it.
    now = datetime.datetime.now(datetime.UTC)
    builder = PolicyBuilder().store(Store([ca])).time(now)
    for subject in (
        x509.DNSName("broker.example.org"),
        x509.IPAddress(ipaddress.ip_address("10.0.0.5")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ):
        chain = builder.build_server_verifier(subject).verify(server, [])
        assert chain[-1] == ca
    with pytest.raises(VerificationError):
        builder.build_server_verifier(x509.DNSName("evil.example.org")).verify(server, [])
    with pytest.raises(VerificationError):  # the other deployment's CA does not vouch for it
        PolicyBuilder().store(Store([_cert(other.ca_cert)])).time(now).build_server_verifier(
            x509.DNSName("localhost")
        ).verify(server, [])

    # Profile: ECDSA P-256 with SHA-256; CA:true pathlen 0 + keyCertSign; leaf CA:false +
    # serverAuth; 825 days; distinct random serials.
    for cert in (ca, server):
        key = cert.public_key()
        assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1"
        assert isinstance(cert.signature_hash_algorithm, hashes.SHA256)
        validity = cert.not_valid_after_utc - cert.not_valid_before_utc
        assert validity == datetime.timedelta(days=VALIDITY_DAYS)
        assert cert.not_valid_before_utc <= now < cert.not_valid_after_utc
        assert 0 < cert.serial_number < 2**159
    assert ca.serial_number != server.serial_number
    ca_constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert ca_constraints.critical and ca_constraints.value.ca
    assert ca_constraints.value.path_length == 0
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    leaf_constraints = server.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert not leaf_constraints.ca
    assert not server.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    usages = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]

    # Each private key belongs to its certificate; the fingerprint is the CA's DER SHA-256.
    assert _public_der(_key(root / "ca.key").public_key()) == _public_der(ca_public)
    server_public = server.public_key()
    assert isinstance(server_public, ec.EllipticCurvePublicKey)
    assert _public_der(_key(root / "server.key").public_key()) == _public_der(server_public)
    assert files.ca_fingerprint == ca.fingerprint(hashes.SHA256()).hex()
    for name, mode in MODES.items():
        assert stat.S_IMODE((root / name).stat().st_mode) == mode, name
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


def test_default_hosts_are_localhost_and_127_0_0_1(tmp_path: Path) -> None:
    files = init_tls(tmp_path)
    san = _cert(files.server_cert).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert san.value.get_values_for_type(x509.DNSName) == ["localhost"]
    assert san.value.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]


def test_refuses_to_overwrite_unless_asked(tmp_path: Path) -> None:
    init_tls(tmp_path)
    root = tls_directory(tmp_path)
    before = {name: (root / name).read_bytes() for name in FILES}
    with pytest.raises(TlsError, match=r"ca\.key: TLS file already exists"):
        init_tls(tmp_path)
    assert {name: (root / name).read_bytes() for name in FILES} == before  # nothing touched
    assert sorted(os.listdir(root)) == sorted(FILES)  # no temporary file left behind
    (root / "ca.key").unlink()  # any one of the four present is enough to refuse
    with pytest.raises(TlsError, match=r"server\.key: TLS file already exists"):
        init_tls(tmp_path)
    files = init_tls(tmp_path, overwrite=True)
    for name in FILES:
        assert (root / name).read_bytes() != before[name]  # fresh keys and certificates
        assert stat.S_IMODE((root / name).stat().st_mode) == MODES[name]
    assert sorted(os.listdir(root)) == sorted(FILES)
    assert _cert(files.ca_cert).fingerprint(hashes.SHA256()).hex() == files.ca_fingerprint


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, ("localhost", "127.0.0.1")),
        (["EXAMPLE.org."], ("example.org",)),
        (["::0:1", "0:0::1", "a-b.c"], ("::1", "a-b.c")),
        (["10.0.0.1", "10.0.0.1"], ("10.0.0.1",)),
        (["x1.example"], ("x1.example",)),
    ],
)
def test_tls_hosts_canonical_form(given: list[str] | None, expected: tuple[str, ...]) -> None:
    assert tls_hosts(given) == expected


@pytest.mark.parametrize(
    "host",
    [
        "",
        "bad host",
        "-a.example",
        "a-.example",
        "a..b",
        "1.2.3",
        "x" * 64 + ".example",
        "[::1]",
        "exa_mple.org",
        "ünïcode.de",
        "*.example.org",
        "a" * 254,
        ".",
    ],
)
def test_tls_hosts_rejects_what_is_neither_an_address_nor_a_dns_name(host: str) -> None:
    with pytest.raises(TlsError, match="IP address or a DNS name") as caught:
        tls_hosts([host])
    assert repr(host) in str(caught.value)


def test_tls_hosts_rejects_an_empty_list_and_a_bare_string(tmp_path: Path) -> None:
    with pytest.raises(TlsError, match=r"1\.\.100, got 0"):
        tls_hosts([])
    with pytest.raises(TlsError, match="list of host names"):
        tls_hosts("localhost")
    with pytest.raises(TlsError, match="bad host"):
        init_tls(tmp_path, hosts=["bad host"])
    assert not tls_directory(tmp_path).exists()  # refused before anything was made


# -- the CA-file loader ------------------------------------------------------------------------


def test_client_context_verifies_peer_and_host_name_with_tls_1_2_or_later(tmp_path: Path) -> None:
    files = init_tls(tmp_path)
    context = client_tls_context(files.ca_cert)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2
    loaded = context.get_ca_certs(binary_form=True)
    assert loaded == [  # only this CA: not the system's trust store besides
        _cert(files.ca_cert).public_bytes(serialization.Encoding.DER)
    ]


def test_client_context_errors_name_the_file_and_never_show_key_material(tmp_path: Path) -> None:
    files = init_tls(tmp_path)
    key_text = files.ca_key.read_text()
    key_lines = [line for line in key_text.splitlines() if line and "-----" not in line]
    der = tmp_path / "ca.der"
    der.write_bytes(_cert(files.ca_cert).public_bytes(serialization.Encoding.DER))
    empty = tmp_path / "notes.txt"
    empty.write_text("no certificate here\n")
    broken = tmp_path / "broken.pem"
    broken.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    cases = [
        (tmp_path / "missing.pem", "must exist"),
        (tmp_path, "regular file"),
        (der, "PEM text"),
        (files.ca_key, "holds a private key"),
        (empty, "at least one PEM certificate"),
        (broken, "valid PEM certificates"),
    ]
    for path, rule in cases:
        with pytest.raises(TlsError, match=rule) as caught:
            client_tls_context(path)
        message = str(caught.value)
        assert isinstance(caught.value, InvalidParameterError)
        assert message.startswith(f"{path}: ")
        assert "\n" not in message
        assert not any(line in message for line in key_lines)


# -- broker URLs and transport settings --------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "mqtts://broker.example.org",
            BrokerAddress(host="broker.example.org", port=8883, tls=True),
        ),
        ("MQTTS://h:1", BrokerAddress(host="h", port=1, tls=True)),
        ("mqtts://[::1]", BrokerAddress(host="::1", port=8883, tls=True)),
        ("mqtts://127.0.0.1:18883", BrokerAddress(host="127.0.0.1", port=18883, tls=True)),
        ("mqtt://h", BrokerAddress(host="h", port=1883, tls=False)),
        ("mqtt://h:8883", BrokerAddress(host="h", port=8883, tls=False)),
    ],
)
def test_parse_broker_address(url: str, expected: BrokerAddress) -> None:
    assert parse_broker_address(url) == expected
    assert parse_broker_url(url) == (expected.host, expected.port)  # the old interface stays


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("mqttss://h", "mqtt:// or mqtts://"),
        ("ssl://h:8883", "mqtt:// or mqtts://"),
        ("mqtts:/h", "mqtt:// or mqtts://"),
        ("mqtts://", "name a host"),
        ("mqtts://h:0", "1..65535"),
        ("mqtts://h:8883/x", "no path"),
        ("mqtts://u:p@h", "credentials"),
    ],
)
def test_parse_broker_address_rejects(url: str, rule: str) -> None:
    with pytest.raises(InvalidParameterError, match=rule.replace(".", r"\.")) as caught:
        parse_broker_address(url)
    assert repr(url) in str(caught.value)


@pytest.mark.asyncio
async def test_transport_tls_settings_must_match_the_scheme(tmp_path: Path) -> None:
    files = init_tls(tmp_path)
    context = client_tls_context(files.ca_cert)
    with pytest.raises(InvalidParameterError, match=r"tls_ca given, but broker URL 'mqtt://h'"):
        MqttTransport("mqtt://h", client_id="x", tls_ca=files.ca_cert)
    with pytest.raises(InvalidParameterError, match=r"tls_context given, but .*plain mqtt://"):
        MqttTransport("mqtt://h:1", client_id="x", tls_context=context)
    with pytest.raises(InvalidParameterError, match="must not both be given"):
        MqttTransport("mqtts://h", client_id="x", tls_ca=files.ca_cert, tls_context=context)
    with pytest.raises(TlsError, match=r"missing\.pem: CA file must exist"):
        MqttTransport("mqtts://h", client_id="x", tls_ca=tmp_path / "missing.pem")
    with_ca = MqttTransport("mqtts://h", client_id="x", tls_ca=files.ca_cert)
    assert (with_ca.tls, with_ca.port, with_ca.trust) == (
        True,
        8883,
        f"the CA file {files.ca_cert}",
    )
    system = MqttTransport("mqtts://h:9", client_id="x")
    assert system.trust == "the system's default trust store"
    plain = MqttTransport("mqtt://h", client_id="x")
    assert (plain.tls, plain.trust) == (False, None)


def test_simulation_options_tls_ca_needs_an_mqtts_broker(tmp_path: Path) -> None:
    files = init_tls(tmp_path)
    for broker in (None, "mqtt://127.0.0.1:1883"):
        with pytest.raises(InvalidParameterError, match="needs an mqtts:// broker"):
            SimulationOptions(n=10, broker=broker, tls_ca=files.ca_cert)
    with pytest.raises(TlsError, match="CA file must exist"):
        SimulationOptions(n=10, broker="mqtts://127.0.0.1", tls_ca=tmp_path / "nope.pem")
    assert SimulationOptions(n=10, broker="mqtts://127.0.0.1", tls_ca=files.ca_cert).tls_ca


def test_mosquitto_config_tls_listener_is_loopback_and_needs_both_settings(
    tmp_path: Path,
) -> None:
    init_tls(tmp_path)
    text = write_mosquitto_config(
        tmp_path, 1883, tls_dir=tls_directory(tmp_path), tls_port=18883
    ).read_text()
    assert "listener 1883 127.0.0.1\n" in text
    assert f"listener 18883 127.0.0.1\ncertfile {tls_directory(tmp_path)}/server.pem\n" in text
    assert "tls_version tlsv1.2\n" in text
    with pytest.raises(InvalidParameterError, match="both or neither"):
        write_mosquitto_config(tmp_path, 1883, tls_dir=tls_directory(tmp_path))
    with pytest.raises(TlsError, match=r"server\.pem: broker TLS file must exist"):
        write_mosquitto_config(tmp_path, 1883, tls_dir=tmp_path / "void", tls_port=18883)


# -- command line ------------------------------------------------------------------------------


def test_keys_init_tls_writes_the_files_with_their_modes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "keys"
    argv = ["keys", "init", str(keys), "--hops", "1", "--clients", "1", "--tls", "--json"]
    assert main([*argv, "--tls-host", "broker.example.org", "--tls-host", "192.0.2.7"]) == 0
    summary = json.loads(capsys.readouterr().out)["tls"]
    assert summary["hosts"] == ["broker.example.org", "192.0.2.7"]
    for name, mode in MODES.items():
        path = keys / "tls" / name
        assert stat.S_IMODE(path.stat().st_mode) == mode, name
    assert summary["ca_cert"] == str(keys / "tls" / "ca.pem")
    assert summary["ca_sha256"] == _cert(keys / "tls" / "ca.pem").fingerprint(hashes.SHA256()).hex()
    config = Path(summary["mosquitto_conf"])
    assert config == keys / "access" / "mosquitto-tls.conf"
    assert stat.S_IMODE(config.stat().st_mode) == 0o644
    text = config.read_text()
    assert "allow_anonymous false\n" in text and f"password_file {keys}/access/passwd\n" in text
    assert f"listener 8883\ncertfile {keys}/tls/server.pem\nkeyfile {keys}/tls/server.key\n" in text
    # Unchanged: the plain configuration stays loopback-only.
    plain = (keys / "access" / "mosquitto.conf").read_text()
    assert "listener 1883 127.0.0.1" in plain
    # The TLS one loads the same per-role bounds plugin (or says why not, the same way).
    plugin = keys / "access" / "mosquitto_bounds.so"
    expected = (
        f"plugin {plugin}\n" if plugin.is_file() else "# Per-role bounds (shuffledp/security/"
    )
    assert expected in plain and expected in text
    assert _bounds_lines(text) == _bounds_lines(plain) != []

    # A second run refuses before touching anything; --tls-host without --tls is an error.
    before = (keys / "tls" / "ca.pem").read_bytes()
    assert main(argv) == 2
    assert "already exists" in capsys.readouterr().err
    assert (keys / "tls" / "ca.pem").read_bytes() == before
    assert main(["keys", "init", str(tmp_path / "other"), "--tls-host", "h"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--tls-host needs --tls" in err
    assert not (tmp_path / "other").exists()


def _bounds_lines(config: str) -> list[str]:
    """The lines of a Mosquitto configuration that load the bounds plugin or say why not."""
    return [line for line in config.splitlines() if line.startswith(("plugin", "# Per-role"))]


def test_component_with_tls_ca_and_a_plain_url_fails_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "keys"
    assert main(["keys", "init", str(keys), "--hops", "1", "--tls", "--json"]) == 0
    capsys.readouterr()
    argv = ["analyzer", "--broker", "mqtt://127.0.0.1:1", "--keys", str(keys), "--k", "2"]
    argv += ["--eps0", "1", "--expected", "2", "--tls-ca", str(keys / "tls" / "ca.pem")]
    argv += ["--manifest", str(keys / "round.json")]  # not read: --tls-ca is refused first
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err == (
        "shuffledp analyzer: error: --tls-ca needs an mqtts:// broker (--broker "
        "mqtts://HOST[:PORT]), got --broker 'mqtt://127.0.0.1:1'\n"
    )
