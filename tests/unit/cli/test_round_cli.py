"""`shuffledp round init` and `round show`: a manifest written from a key directory verifies
against it, a changed one does not, and every bad input is one line with status 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from shuffledp.security.keys import init_key_directory
from shuffledp.security.manifests import load_round_manifest
from tests.unit.cli.conftest import Shuffledp


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    directory = tmp_path / "keys"
    init_key_directory(directory, hops=2)
    return directory


def test_init_then_show_verifies(shuffledp: Shuffledp, keys: Path, tmp_path: Path) -> None:
    path = tmp_path / "round.json"
    made = shuffledp(
        "round",
        "init",
        str(path),
        "--keys",
        str(keys),
        "--k",
        "10",
        "--eps0",
        "2",
        "--process-clients",
        "1001,1000",
        "--round-ids",
        "3-5",
        "--colluders",
        "4",
    )
    assert made.code == 0, made.err
    manifest = load_round_manifest(path, keys)
    assert manifest.clients == (1001, 1000) and manifest.expected == 2001
    assert manifest.rounds == (3, 4, 5) and manifest.colluders == 4
    assert manifest.min_batch == 1000 and manifest.n_hops == 2
    shown = shuffledp("round", "show", str(path), "--keys", str(keys))
    assert shown.code == 0
    assert "signature: valid" in shown.out
    assert f"digest: {manifest.digest.hex()}" in shown.out
    assert "reports expected: 2,001 (clients-0: 1,001, clients-1: 1,000)" in shown.out


def test_even_split_is_exact(shuffledp: Shuffledp, keys: Path, tmp_path: Path) -> None:
    path = tmp_path / "round.json"
    made = shuffledp(
        "round",
        "init",
        str(path),
        "--keys",
        str(keys),
        "--k",
        "15",
        "--eps0",
        "4",
        "--n",
        "2001",
        "--client-processes",
        "2",
    )
    assert made.code == 0, made.err
    assert load_round_manifest(path, keys).clients == (1001, 1000)


def test_changed_manifest_is_refused_in_one_line(
    shuffledp: Shuffledp, keys: Path, tmp_path: Path
) -> None:
    path = tmp_path / "round.json"
    shuffledp(
        "round", "init", str(path), "--keys", str(keys), "--k", "15", "--eps0", "4", "--n", "2000"
    )
    document = json.loads(path.read_text())
    document["manifest"]["eps0"] = 1.0
    path.write_text(json.dumps(document))
    shown = shuffledp("round", "show", str(path), "--keys", str(keys))
    assert shown.code == 2
    assert shown.err.count("\n") == 1
    assert "manifest signature must verify with the coordinator key" in shown.err
    unverified = shuffledp("round", "show", str(path))
    assert unverified.code == 0 and "NOT VERIFIED" in unverified.out


def test_manifest_of_another_key_directory_is_refused(
    shuffledp: Shuffledp, keys: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    init_key_directory(other, hops=2)
    path = tmp_path / "round.json"
    shuffledp(
        "round", "init", str(path), "--keys", str(other), "--k", "15", "--eps0", "4", "--n", "2000"
    )
    shown = shuffledp("round", "show", str(path), "--keys", str(keys))
    assert shown.code == 2
    assert "signed by the trusted coordinator key" in shown.err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--n", "10", "--round-ids", "5-2"], "--round-ids must be ID, FIRST-LAST"),
        (["--n", "10", "--round-ids", "x"], "--round-ids must be ID, FIRST-LAST"),
        (["--process-clients", "10,0"], "--process-clients must be integers >= 1"),
        (["--process-clients", "a,b"], "--process-clients must be comma-separated integers"),
        (["--n", "3", "--client-processes", "4"], r"--client-processes must be an integer in"),
        (["--n", "10", "--colluders", "10"], "manifest field colluders must be in"),
        (["--n", "10", "--min-batch", "11"], "manifest field min_batch must be in"),
    ],
)
def test_bad_input_is_one_line(
    shuffledp: Shuffledp, keys: Path, tmp_path: Path, flags: list[str], message: str
) -> None:
    path = tmp_path / "round.json"
    outcome = shuffledp(
        "round", "init", str(path), "--keys", str(keys), "--k", "15", "--eps0", "4", *flags
    )
    assert outcome.code == 2
    assert re.search(message, outcome.err), outcome.err
    assert outcome.err.count("\n") == 1
    assert not path.exists()


def test_existing_file_needs_overwrite(shuffledp: Shuffledp, keys: Path, tmp_path: Path) -> None:
    path = tmp_path / "round.json"
    args = [
        "round",
        "init",
        str(path),
        "--keys",
        str(keys),
        "--k",
        "15",
        "--eps0",
        "4",
        "--n",
        "100",
    ]
    assert shuffledp(*args).code == 0
    again = shuffledp(*args)
    assert again.code == 2 and "already exists (--overwrite replaces it)" in again.err
    assert shuffledp(*args, "--overwrite").code == 0
