"""The key directory (shuffledp.security.keys) and `shuffledp keys init`: round trips, exact file modes,
refusals of every malformed directory, and no private key material in any output or message."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nacl.exceptions import CryptoError
from nacl.public import SealedBox
from nacl.signing import VerifyKey

from shuffledp.cli import main
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.onion import (
    message_length,
    peel,
    private_key_to_bytes,
    public_key_to_bytes,
    wrap,
)
from shuffledp.security.keys import (
    KeyDirectoryError,
    PublicDirectory,
    fingerprint,
    init_key_directory,
    load_analyzer_key,
    load_hop_key,
    load_private_key,
    load_public_directory,
    load_signing_key,
    private_key_path,
    public_file_path,
    signing_key_path,
    stage_names,
)

posix_only = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _private_hexes(directory: Path) -> list[str]:
    return sorted(p.read_text().strip() for p in directory.glob("*.key"))


def _edit_public(directory: Path, **changes: Any) -> None:
    path = public_file_path(directory)
    document = json.loads(path.read_text())
    document.update(changes)
    path.write_text(json.dumps(document))


@pytest.fixture
def keydir(tmp_path: Path) -> Path:
    directory = tmp_path / "keys"
    init_key_directory(directory, hops=3)
    return directory


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


# --- round trip -------------------------------------------------------------------------------


def test_init_then_load_round_trip(tmp_path: Path) -> None:
    directory = tmp_path / "keys"
    created = init_key_directory(directory, hops=3)
    loaded = load_public_directory(directory)
    assert isinstance(loaded, PublicDirectory)
    assert loaded.n_hops == created.n_hops == 3
    assert len(loaded.hop_keys) == 3
    assert [public_key_to_bytes(k) for k in loaded.hop_keys] == [
        public_key_to_bytes(k) for k in created.hop_keys
    ]
    assert public_key_to_bytes(loaded.analyzer_key) == public_key_to_bytes(created.analyzer_key)
    assert sorted(p.name for p in directory.iterdir()) == [
        "analyzer.key",
        "analyzer.sign",
        "coordinator.sign",
        "hop-0.key",
        "hop-0.sign",
        "hop-1.key",
        "hop-1.sign",
        "hop-2.key",
        "hop-2.sign",
        "public.json",
    ]
    assert loaded.verify_keys == created.verify_keys
    assert sorted(loaded.verify_keys) == ["analyzer", "coordinator", "hop-0", "hop-1", "hop-2"]


def test_public_json_layout(keydir: Path) -> None:
    document = json.loads(public_file_path(keydir).read_text())
    assert set(document) == {"format", "version", "n_hops", "hops", "analyzer", "signing"}
    assert document["format"] == "shuffledp-keys"
    assert document["version"] == 2
    assert document["n_hops"] == 3
    published = load_public_directory(keydir)
    assert document["hops"] == [public_key_to_bytes(k).hex() for k in published.hop_keys]
    assert document["analyzer"] == public_key_to_bytes(published.analyzer_key).hex()


def test_private_key_files_hold_lowercase_hex_and_newline(keydir: Path) -> None:
    for stage in stage_names(3):
        text = private_key_path(keydir, stage).read_text()
        assert len(text) == 65 and text.endswith("\n")
        assert all(c in "0123456789abcdef" for c in text[:64])
        assert private_key_to_bytes(load_private_key(keydir, stage)).hex() == text[:64]


def test_each_private_key_matches_its_published_public_key(keydir: Path) -> None:
    published = load_public_directory(keydir)
    for i in range(3):
        key = load_hop_key(keydir, i)
        assert public_key_to_bytes(key.public_key) == public_key_to_bytes(published.hop_keys[i])
    analyzer = load_analyzer_key(keydir)
    assert public_key_to_bytes(analyzer.public_key) == public_key_to_bytes(published.analyzer_key)
    assert len(set(_private_hexes(keydir))) == 4


def test_sealed_to_loaded_public_key_opens_with_loaded_private_key(keydir: Path) -> None:
    published = load_public_directory(keydir)
    for stage in stage_names(3):
        box = SealedBox(published.stage_key(stage)).encrypt(b"for " + stage.encode())
        assert SealedBox(load_private_key(keydir, stage)).decrypt(box) == b"for " + stage.encode()
    other = SealedBox(published.hop_keys[0]).encrypt(b"x")
    with pytest.raises(CryptoError):
        SealedBox(load_hop_key(keydir, 1)).decrypt(other)


def test_onion_through_loaded_keys(keydir: Path) -> None:
    published = load_public_directory(keydir)
    record = bytes(range(64))  # RECORD_SIZE of record version 2
    message = wrap(record, published.hop_keys, published.analyzer_key)
    for i in range(3):
        message = peel(message, load_hop_key(keydir, i), expected_length=message_length(i, 3))
    assert peel(message, load_analyzer_key(keydir), expected_length=message_length(3, 3)) == record


def test_init_creates_missing_parents_and_directory_mode_0700(tmp_path: Path) -> None:
    directory = tmp_path / "a" / "b" / "keys"
    init_key_directory(directory, hops=1)
    assert load_public_directory(directory).n_hops == 1
    if os.name == "posix":
        assert _mode(directory) == 0o700


def test_init_into_existing_empty_directory(tmp_path: Path) -> None:
    init_key_directory(tmp_path, hops=64)
    assert load_public_directory(tmp_path).n_hops == 64
    assert len(list(tmp_path.glob("hop-*.key"))) == 64


# --- file modes -------------------------------------------------------------------------------


@posix_only
@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077, 0o277])
def test_file_modes_are_exact_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        init_key_directory(tmp_path / "keys", hops=2)
    finally:
        os.umask(old)
    for stage in stage_names(2):
        assert _mode(private_key_path(tmp_path / "keys", stage)) == 0o600
    assert _mode(public_file_path(tmp_path / "keys")) == 0o644


@posix_only
def test_overwritten_files_keep_exact_modes(keydir: Path, umask_022: None) -> None:
    init_key_directory(keydir, hops=3, overwrite=True)
    for stage in stage_names(3):
        assert _mode(private_key_path(keydir, stage)) == 0o600
    assert _mode(public_file_path(keydir)) == 0o644
    assert not [p for p in keydir.iterdir() if p.name.startswith(".")]  # no temporary files left


# --- refusal and overwrite --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["public.json", "hop-0.key", "hop-2.key", "analyzer.key"])
def test_refuses_when_any_file_exists(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text("old\n")
    with pytest.raises(
        KeyDirectoryError, match=re.escape(f"{name}: key directory file already exists")
    ):
        init_key_directory(tmp_path, hops=3)
    assert [p.name for p in tmp_path.iterdir()] == [name]  # nothing written
    assert (tmp_path / name).read_text() == "old\n"


def test_refuses_second_init_and_keeps_keys(keydir: Path) -> None:
    before = _private_hexes(keydir)
    public_before = public_file_path(keydir).read_text()
    with pytest.raises(KeyDirectoryError, match="already exists"):
        init_key_directory(keydir, hops=3)
    assert _private_hexes(keydir) == before
    assert public_file_path(keydir).read_text() == public_before


def test_refuses_stale_hop_key_from_larger_init(tmp_path: Path) -> None:
    (tmp_path / "hop-7.key").write_text("old\n")
    with pytest.raises(KeyDirectoryError, match=r"hop-7\.key"):
        init_key_directory(tmp_path, hops=2)


def test_overwrite_gives_new_keys(keydir: Path) -> None:
    before_private = _private_hexes(keydir)
    before_public = load_public_directory(keydir)
    after_public = init_key_directory(keydir, hops=3, overwrite=True)
    after_private = _private_hexes(keydir)
    assert len(after_private) == 4
    assert not set(before_private) & set(after_private)
    old = {public_key_to_bytes(k) for k in (*before_public.hop_keys, before_public.analyzer_key)}
    new = {public_key_to_bytes(k) for k in (*after_public.hop_keys, after_public.analyzer_key)}
    assert not old & new
    for stage in stage_names(3):  # the new directory is consistent
        load_private_key(keydir, stage)


def test_overwrite_with_fewer_hops_removes_stale_hop_keys(keydir: Path) -> None:
    init_key_directory(keydir, hops=1, overwrite=True)
    assert sorted(p.name for p in keydir.iterdir()) == [
        "analyzer.key",
        "analyzer.sign",
        "coordinator.sign",
        "hop-0.key",
        "hop-0.sign",
        "public.json",
    ]
    assert load_public_directory(keydir).n_hops == 1
    load_hop_key(keydir, 0)


def test_refuses_a_file_as_directory(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("")
    with pytest.raises(KeyDirectoryError, match="must be a directory"):
        init_key_directory(target, hops=1)


@pytest.mark.parametrize("hops", [0, 65, -1, True, 2.0, "3", None])
def test_hops_must_be_an_integer_in_1_64(tmp_path: Path, hops: Any) -> None:
    with pytest.raises(InvalidParameterError, match="hops must be"):
        init_key_directory(tmp_path / "keys", hops=hops)
    assert not (tmp_path / "keys").exists()


# --- load_public_directory refusals -------------------------------------------------------------


def test_missing_public_file(tmp_path: Path) -> None:
    with pytest.raises(KeyDirectoryError, match=r"public\.json: public key file must exist"):
        load_public_directory(tmp_path)


@pytest.mark.parametrize("content", ["{not json", "", "\xff"])
def test_public_file_not_json(keydir: Path, content: str) -> None:
    public_file_path(keydir).write_bytes(content.encode("latin-1"))
    with pytest.raises(
        KeyDirectoryError, match=r"public\.json: public key file must be UTF-8 JSON"
    ):
        load_public_directory(keydir)


def test_public_file_not_an_object(keydir: Path) -> None:
    public_file_path(keydir).write_text("[1, 2]")
    with pytest.raises(KeyDirectoryError, match="must hold a JSON object, got list"):
        load_public_directory(keydir)


@pytest.mark.parametrize("fmt", ["shuffledp-key", None, 1])
def test_wrong_format(keydir: Path, fmt: Any) -> None:
    _edit_public(keydir, format=fmt)
    with pytest.raises(KeyDirectoryError, match=r"public\.json: format must be 'shuffledp-keys'"):
        load_public_directory(keydir)


@pytest.mark.parametrize("version", [3, 0, True, 1.0, "1", None])
def test_wrong_version(keydir: Path, version: Any) -> None:
    _edit_public(keydir, version=version)
    with pytest.raises(KeyDirectoryError, match=r"public\.json: version must be one of 1, 2, got"):
        load_public_directory(keydir)


@pytest.mark.parametrize("n_hops", [0, 65, True, 3.0, "3", None])
def test_n_hops_must_be_an_integer_in_1_64(keydir: Path, n_hops: Any) -> None:
    _edit_public(keydir, n_hops=n_hops)
    with pytest.raises(KeyDirectoryError, match=r"public\.json: n_hops must be"):
        load_public_directory(keydir)


@pytest.mark.parametrize("n_hops", [2, 4])
def test_hop_count_must_equal_n_hops(keydir: Path, n_hops: int) -> None:
    _edit_public(keydir, n_hops=n_hops)
    with pytest.raises(
        KeyDirectoryError, match=re.escape(f"hops must hold n_hops = {n_hops} public keys, got 3")
    ):
        load_public_directory(keydir)


def test_hops_must_be_a_list(keydir: Path) -> None:
    _edit_public(keydir, hops="abc")
    with pytest.raises(KeyDirectoryError, match="hops must be a list"):
        load_public_directory(keydir)


@pytest.mark.parametrize(
    "bad", ["ab" * 31, "ab" * 33, "zz" * 32, "0x" + "ab" * 31, " " + "ab" * 32, 12, None]
)
def test_hop_key_must_be_64_hex_characters(keydir: Path, bad: Any) -> None:
    document = json.loads(public_file_path(keydir).read_text())
    _edit_public(keydir, hops=[document["hops"][0], bad, document["hops"][2]])
    with pytest.raises(KeyDirectoryError, match=r"hops\[1\] must be a string of 64 hex characters"):
        load_public_directory(keydir)


def test_analyzer_key_must_be_64_hex_characters(keydir: Path) -> None:
    _edit_public(keydir, analyzer="ab" * 31 + "a")
    with pytest.raises(KeyDirectoryError, match="analyzer must be a string of 64 hex"):
        load_public_directory(keydir)


def test_missing_analyzer_key(keydir: Path) -> None:
    document = json.loads(public_file_path(keydir).read_text())
    del document["analyzer"]
    public_file_path(keydir).write_text(json.dumps(document))
    with pytest.raises(KeyDirectoryError, match="analyzer must be a string"):
        load_public_directory(keydir)


@pytest.mark.parametrize("where", ["hop", "analyzer"])
def test_low_order_public_key_refused(keydir: Path, where: str) -> None:
    zeros = "00" * 32
    if where == "hop":
        document = json.loads(public_file_path(keydir).read_text())
        _edit_public(keydir, hops=[zeros, *document["hops"][1:]])
        name = r"hops\[0\]"
    else:
        _edit_public(keydir, analyzer=zeros)
        name = "analyzer"
    with pytest.raises(KeyDirectoryError, match=rf"public\.json: {name}: .*low order"):
        load_public_directory(keydir)


def test_duplicate_hop_keys_refused(keydir: Path) -> None:
    document = json.loads(public_file_path(keydir).read_text())
    hops = document["hops"]
    _edit_public(keydir, hops=[hops[0], hops[1], hops[0]])
    with pytest.raises(KeyDirectoryError, match=r"distinct, hops\[2\] equals hops\[0\]"):
        load_public_directory(keydir)


def test_analyzer_key_equal_to_a_hop_key_refused(keydir: Path) -> None:
    document = json.loads(public_file_path(keydir).read_text())
    _edit_public(keydir, analyzer=document["hops"][1])
    with pytest.raises(KeyDirectoryError, match=r"distinct, analyzer equals hops\[1\]"):
        load_public_directory(keydir)


def test_uppercase_hex_public_key_accepted(keydir: Path) -> None:
    document = json.loads(public_file_path(keydir).read_text())
    _edit_public(keydir, analyzer=document["analyzer"].upper())
    assert (
        public_key_to_bytes(load_public_directory(keydir).analyzer_key).hex()
        == (document["analyzer"])
    )


# --- load_private_key refusals ------------------------------------------------------------------


def test_missing_private_key_file(keydir: Path) -> None:
    private_key_path(keydir, "hop-1").unlink()
    with pytest.raises(KeyDirectoryError, match=r"hop-1\.key: private key file must exist"):
        load_hop_key(keydir, 1)


@posix_only
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o700 | 0o010])
def test_private_key_with_group_or_other_bits_refused(keydir: Path, mode: int) -> None:
    path = private_key_path(keydir, "analyzer")
    secret = path.read_text().strip()
    os.chmod(path, mode)
    with pytest.raises(KeyDirectoryError) as info:
        load_analyzer_key(keydir)
    message = str(info.value)
    assert message.startswith(f"{path}: private key file must have mode 0600")
    assert f"got {mode:04o}" in message and f"chmod 600 {path}" in message
    assert secret not in message


@posix_only
def test_private_key_mode_0400_accepted(keydir: Path) -> None:
    path = private_key_path(keydir, "hop-0")
    os.chmod(path, 0o400)
    load_hop_key(keydir, 0)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"ab" * 31 + b"\n",
        b"ab" * 33 + b"\n",
        b"zz" * 32 + b"\n",
        b"ab" * 16 + b" " + b"ab" * 16 + b"\n",
        b"\xff" * 64,
        b"ab" * 2000,
    ],
)
def test_private_key_content_must_be_64_hex_characters(keydir: Path, content: bytes) -> None:
    path = private_key_path(keydir, "hop-2")
    path.write_bytes(content)
    with pytest.raises(KeyDirectoryError) as info:
        load_hop_key(keydir, 2)
    message = str(info.value)
    assert message.startswith(f"{path}: private key file must hold exactly 64 hex characters")
    if content:
        assert content[:8].decode("latin-1") not in message


def test_private_key_surrounding_whitespace_and_uppercase_accepted(keydir: Path) -> None:
    path = private_key_path(keydir, "hop-0")
    secret = path.read_text().strip()
    path.write_text("\n  " + secret.upper() + " \r\n\n")
    assert private_key_to_bytes(load_hop_key(keydir, 0)).hex() == secret


def test_swapped_private_keys_refused_as_mismatch(keydir: Path) -> None:
    a, b = private_key_path(keydir, "hop-0"), private_key_path(keydir, "hop-1")
    secret_a, secret_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(secret_b)
    b.write_bytes(secret_a)
    published = load_public_directory(keydir)
    with pytest.raises(KeyDirectoryError) as info:
        load_hop_key(keydir, 0)
    message = str(info.value)
    assert message.startswith(f"{a}: private key must match the public key published for hop-0")
    assert fingerprint(published.hop_keys[0]) in message
    assert secret_a.decode().strip() not in message and secret_b.decode().strip() not in message


def test_private_key_from_another_directory_refused(keydir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    init_key_directory(other, hops=3)
    shutil.copy(private_key_path(other, "analyzer"), private_key_path(keydir, "analyzer"))
    with pytest.raises(KeyDirectoryError, match="mixed-up key directory"):
        load_analyzer_key(keydir)
    load_analyzer_key(other)  # the original still loads where it belongs


@pytest.mark.parametrize(
    "stage", ["hop-01", "hop--1", "hop-", "hop-x", "Analyzer", "analyzer ", "hop_0", "", "../hop-0"]
)
def test_bad_stage_name_refused(keydir: Path, stage: str) -> None:
    with pytest.raises(KeyDirectoryError, match="stage must be 'hop-<i>'"):
        load_private_key(keydir, stage)


def test_non_string_stage_refused(keydir: Path) -> None:
    bad: Any = 0
    with pytest.raises(KeyDirectoryError, match="stage must be"):
        load_private_key(keydir, bad)


def test_stage_beyond_n_hops_refused(keydir: Path) -> None:
    shutil.copy(private_key_path(keydir, "hop-0"), keydir / "hop-3.key")
    with pytest.raises(
        KeyDirectoryError, match=r"public\.json: stage must be one of hop-0\.\.hop-2"
    ):
        load_private_key(keydir, "hop-3")


@pytest.mark.parametrize("index", [-1, 64, True, 1.0])
def test_load_hop_key_index_must_be_an_integer(keydir: Path, index: Any) -> None:
    with pytest.raises(InvalidParameterError, match="hop index must be"):
        load_hop_key(keydir, index)


def test_private_key_load_checks_public_file_too(keydir: Path) -> None:
    _edit_public(keydir, version=3)
    with pytest.raises(KeyDirectoryError, match="version must be one of 1, 2"):
        load_hop_key(keydir, 0)


def test_key_directory_error_is_an_invalid_parameter_error() -> None:
    assert issubclass(KeyDirectoryError, InvalidParameterError)


def test_no_private_key_in_reprs(keydir: Path) -> None:
    secrets = _private_hexes(keydir)
    text = repr(load_public_directory(keydir)) + repr(
        init_key_directory(keydir, hops=3, overwrite=True)
    )
    secrets += _private_hexes(keydir)
    assert not any(secret in text for secret in secrets)


# --- CLI --------------------------------------------------------------------------------------


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        assert isinstance(exc.code, int), exc.code
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_init_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = tmp_path / "keys"
    code, out, err = _run(capsys, ["keys", "init", str(directory), "--hops", "2", "--json"])
    assert code == 0, err
    assert err == ""
    assert out.count("\n") == 1
    data = json.loads(out)
    assert set(data) == {
        "directory",
        "n_hops",
        "public",
        "private",
        "hops",
        "analyzer",
        "access",
        "broker_identities",
        "prefix",
    }
    assert data["directory"] == str(directory)
    assert data["n_hops"] == 2
    assert data["public"] == str(directory / "public.json")
    assert data["private"] == [
        str(directory / "hop-0.key"),
        str(directory / "hop-1.key"),
        str(directory / "analyzer.key"),
    ]
    published = load_public_directory(directory)
    assert data["hops"] == [public_key_to_bytes(k).hex() for k in published.hop_keys]
    assert data["analyzer"] == public_key_to_bytes(published.analyzer_key).hex()
    for secret in _private_hexes(directory):
        assert secret not in out


def test_cli_init_default_three_hops_human_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "keys"
    code, out, err = _run(capsys, ["keys", "init", str(directory)])
    assert code == 0, err
    assert err == ""
    published = load_public_directory(directory)
    assert published.n_hops == 3
    assert str(directory) in out
    for name in ["public.json", "hop-0.key", "hop-1.key", "hop-2.key", "analyzer.key"]:
        assert name in out
    if os.name == "posix":
        assert out.count("0600") == 4 and out.count("0644") == 1
    for key in (*published.hop_keys, published.analyzer_key):
        assert fingerprint(key) in out
        assert public_key_to_bytes(key).hex() not in out  # fingerprints, not whole keys
    for secret in _private_hexes(directory):
        assert secret not in out
        assert secret[:16] not in out


def test_cli_init_refuses_existing_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "keys"
    assert _run(capsys, ["keys", "init", str(directory), "--hops", "2"])[0] == 0
    before = _private_hexes(directory)
    code, out, err = _run(capsys, ["keys", "init", str(directory), "--hops", "2"])
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.endswith("\n")
    assert err.startswith("shuffledp keys init: error: ")
    assert "already exists" in err and "--overwrite" in err
    assert _private_hexes(directory) == before
    for secret in before:
        assert secret not in err


def test_cli_init_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = tmp_path / "keys"
    assert _run(capsys, ["keys", "init", str(directory), "--hops", "2"])[0] == 0
    before = _private_hexes(directory)
    code, out, err = _run(
        capsys, ["keys", "init", str(directory), "--hops", "2", "--overwrite", "--json"]
    )
    assert code == 0, err
    after = _private_hexes(directory)
    assert not set(before) & set(after)
    for secret in before + after:
        assert secret not in out and secret not in err


@pytest.mark.parametrize("hops", ["0", "65", "-3"])
def test_cli_hops_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hops: str
) -> None:
    code, out, err = _run(capsys, ["keys", "init", str(tmp_path / "k"), "--hops", hops])
    assert code == 2
    assert out == ""
    assert err == f"shuffledp keys init: error: --hops must be in [1, 64], got {hops}\n"
    assert not (tmp_path / "k").exists()


def test_cli_keys_without_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, ["keys"])
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "required" in err and "Traceback" not in err


def test_cli_hops_not_an_integer_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, ["keys", "init", str(tmp_path), "--hops", "two"])
    assert code == 2
    assert err == "shuffledp keys init: error: --hops must be an integer, got 'two'\n"
    assert list(tmp_path.iterdir()) == []


# --- signing keys (round manifests, signed END statements) -----------------------------------


@pytest.mark.parametrize("signer", ["hop-0", "hop-2", "analyzer", "coordinator"])
def test_signing_key_signs_what_its_published_verify_key_verifies(
    keydir: Path, signer: str
) -> None:
    key = load_signing_key(keydir, signer)
    published = load_public_directory(keydir).verify_key(signer)
    signed = key.sign(b"statement")
    assert VerifyKey(published).verify(signed) == b"statement"
    assert stat.S_IMODE(signing_key_path(keydir, signer).stat().st_mode) == 0o600


def test_signing_key_of_another_signer_is_refused(keydir: Path) -> None:
    signing_key_path(keydir, "hop-0").write_bytes(signing_key_path(keydir, "hop-1").read_bytes())
    with pytest.raises(KeyDirectoryError, match=r"hop-0\.sign: signing key must match"):
        load_signing_key(keydir, "hop-0")


def test_version_1_directory_loads_without_signing_keys(keydir: Path) -> None:
    path = public_file_path(keydir)
    document = json.loads(path.read_text())
    del document["signing"]
    document["version"] = 1
    path.write_text(json.dumps(document))
    published = load_public_directory(keydir)
    assert published.n_hops == 3 and not published.verify_keys
    with pytest.raises(KeyDirectoryError, match="no signing key for coordinator"):
        published.verify_key("coordinator")


@pytest.mark.parametrize(
    "signing",
    [None, {}, {"hop-0": "00" * 32}, "x"],
)
def test_malformed_signing_object_is_refused(keydir: Path, signing: Any) -> None:
    _edit_public(keydir, signing=signing)
    with pytest.raises(KeyDirectoryError, match=r"public\.json: signing must map exactly"):
        load_public_directory(keydir)


def test_equal_verify_keys_are_refused(keydir: Path) -> None:
    document = json.loads(public_file_path(keydir).read_text())
    signing = dict(document["signing"])
    signing["hop-1"] = signing["hop-0"]
    _edit_public(keydir, signing=signing)
    with pytest.raises(KeyDirectoryError, match="pairwise distinct"):
        load_public_directory(keydir)
