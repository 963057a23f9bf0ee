"""Every component runs from the round manifest: a flag that contradicts it, a manifest that
does not verify, or a round it does not cover refuses the start in one line (exit 2), before
the broker is contacted (the broker here is unreachable: reaching it would be exit 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shuffledp.security.access import init_access
from shuffledp.security.keys import init_key_directory
from tests.manifests import write_round_manifest
from tests.unit.cli.conftest import Shuffledp

UNREACHABLE = "mqtt://127.0.0.1:1"


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    directory = tmp_path / "keys"
    init_key_directory(directory, hops=2)
    init_access(directory, hops=2, client_processes=2, prefix="shuffledp")
    write_round_manifest(
        directory, tmp_path / "round.json", k=15, eps0=4.0, clients=(1001, 1000), min_batch=1000
    )
    return directory


def _run(shuffledp: Shuffledp, keys: Path, command: str, *flags: str) -> str:
    manifest = keys.parent / "round.json"
    outcome = shuffledp(
        command, "--broker", UNREACHABLE, "--keys", str(keys), "--manifest", str(manifest), *flags
    )
    assert outcome.code == 2, (outcome.code, outcome.err)
    assert outcome.err.count("\n") == 1, outcome.err
    return outcome.err


@pytest.mark.parametrize(
    ("command", "flags", "message"),
    [
        ("analyzer", ["--eps0", "1"], "--eps0 1 contradicts the manifest's eps0 = 4"),
        ("analyzer", ["--k", "10"], "--k 10 contradicts the manifest's k = 15"),
        (
            "analyzer",
            ["--expected", "1500"],
            "--expected 1500 contradicts the manifest's expected = 2001",
        ),
        ("analyzer", ["--delta", "1e-9"], "--delta 1e-09 contradicts the manifest's delta"),
        ("hop", ["--index", "1", "--expected", "1500"], "--expected 1500 contradicts"),
        ("hop", ["--index", "0", "--min-batch", "10"], "--min-batch 10 contradicts"),
        ("hop", ["--index", "0", "--deadline", "5"], "--deadline 5 contradicts"),
        ("hop", ["--index", "0", "--prefix", "other"], "--prefix other contradicts"),
        ("hop", ["--index", "0", "--round", "2"], "--round 2 contradicts the manifest's rounds"),
        ("clients", ["--values", "synthetic", "--eps0", "2"], "--eps0 2 contradicts"),
        (
            "clients",
            ["--values", "synthetic", "--count", "1001", "--name", "clients-1"],
            r"--count 1001 contradicts the manifest's clients[1] = 1000",
        ),
        (
            "clients",
            ["--values", "synthetic", "--name", "clients-2"],
            "--name clients-2 is not one of the manifest's 2 client processes",
        ),
        (
            "clients",
            ["--values", "synthetic", "--no-auth"],
            "--no-auth contradicts the manifest's client_auth = true",
        ),
        ("hop", ["--index", "0", "--no-auth"], "--no-auth contradicts"),
    ],
)
def test_a_flag_that_contradicts_the_manifest_refuses_the_start(
    shuffledp: Shuffledp, keys: Path, command: str, flags: list[str], message: str
) -> None:
    assert message in _run(shuffledp, keys, command, *flags)


def test_a_flag_that_repeats_the_manifest_is_accepted(shuffledp: Shuffledp, keys: Path) -> None:
    manifest = keys.parent / "round.json"
    outcome = shuffledp(
        "analyzer",
        "--broker",
        UNREACHABLE,
        "--keys",
        str(keys),
        "--manifest",
        str(manifest),
        "--k",
        "15",
        "--eps0",
        "4",
        "--expected",
        "2001",
        "--no-reconnect",  # else it tries the unreachable broker for --reconnect's 60 s
    )
    assert outcome.code == 1 and "cannot reach the broker" in outcome.err


def test_a_changed_manifest_is_refused(shuffledp: Shuffledp, keys: Path) -> None:
    path = keys.parent / "round.json"
    document = json.loads(path.read_text())
    document["manifest"]["eps0"] = 1.0
    path.write_text(json.dumps(document))
    for command, flags in [("analyzer", []), ("hop", ["--index", "1"])]:
        assert "manifest signature must verify" in _run(shuffledp, keys, command, *flags)


def test_a_manifest_of_another_deployment_is_refused(
    shuffledp: Shuffledp, keys: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    init_key_directory(other, hops=2)
    write_round_manifest(other, keys.parent / "round.json")
    assert "signed by the trusted coordinator key" in _run(shuffledp, keys, "analyzer")
