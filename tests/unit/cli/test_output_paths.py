"""Output paths are checked before any work starts: an --out that cannot be written is one line
with exit status 2 in well under a second, never a traceback after the round."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from shuffledp.cli.paths import check_input_file, check_output_dir, check_output_file
from shuffledp.errors import InvalidParameterError
from tests.manifests import write_round_manifest
from tests.unit.cli.conftest import Shuffledp

UNREACHABLE = "mqtt://127.0.0.1:1"


@pytest.fixture
def keys(shuffledp: Shuffledp, tmp_path: Path) -> Path:
    directory = tmp_path / "keys"
    assert shuffledp("keys", "init", str(directory), "--hops", "1").code == 0
    write_round_manifest(directory, directory / "round.json")
    return directory


def _analyzer(keys: Path, *extra: str) -> list[str]:
    return [
        "analyzer",
        "--broker",
        UNREACHABLE,
        "--no-reconnect",  # else it waits for the broker to come up
        "--keys",
        str(keys),
        "--manifest",
        str(keys / "round.json"),
        "--k",
        "3",
        "--eps0",
        "1",
        "--expected",
        "4",
        *extra,
    ]


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("afile/report.json", "afile is not a folder"),
        ("afile/deeper/report.json", "afile is not a folder"),
        ("adir", "is a folder, a file name is needed"),
    ],
)
def test_analyzer_out_refused_before_the_broker_is_contacted(
    shuffledp: Shuffledp, keys: Path, tmp_path: Path, where: str, message: str
) -> None:
    """With an unreachable broker, reaching the broker would be exit 1 and a broker message:
    exit 2 naming --out shows the path was checked first, and fast."""
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    started = time.monotonic()
    outcome = shuffledp(*_analyzer(keys, "--out", str(tmp_path / where)))
    elapsed = time.monotonic() - started
    assert outcome.code == 2, outcome.err
    assert outcome.err.count("\n") == 1
    assert outcome.err.startswith(f"shuffledp analyzer: error: --out {tmp_path / where}: ")
    assert message in outcome.err
    assert elapsed < 1.0


def test_analyzer_out_in_new_folders_is_accepted_and_nothing_created_early(
    shuffledp: Shuffledp, keys: Path, tmp_path: Path
) -> None:
    out = tmp_path / "new" / "deeper" / "report.json"
    outcome = shuffledp(*_analyzer(keys, "--out", str(out)))
    assert outcome.code == 1  # past the check, stopped by the unreachable broker
    assert "cannot reach the broker" in outcome.err
    assert not (tmp_path / "new").exists()


def test_hop_state_dir_under_a_file_is_refused(
    shuffledp: Shuffledp, keys: Path, tmp_path: Path
) -> None:
    (tmp_path / "afile").write_text("x")
    state = tmp_path / "afile" / "state"
    argv = ["hop", "--broker", UNREACHABLE, "--keys", str(keys), "--index", "0"]
    argv += ["--manifest", str(keys / "round.json")]
    outcome = shuffledp(*argv, "--expected", "4", "--state-dir", str(state))
    assert outcome.code == 2
    assert (
        outcome.err
        == f"shuffledp hop: error: --state-dir {state}: {tmp_path / 'afile'} is not a folder\n"
    )


def test_experiment_out_under_a_file_is_refused_at_once(
    shuffledp: Shuffledp, tmp_path: Path
) -> None:
    (tmp_path / "afile").write_text("x")
    started = time.monotonic()
    outcome = shuffledp("experiment", "all", "--out", str(tmp_path / "afile" / "results"))
    assert outcome.code == 2
    assert "--out" in outcome.err and "is not a folder" in outcome.err
    assert outcome.out == ""
    assert time.monotonic() - started < 1.0


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_experiment_out_that_cannot_be_created_names_out(shuffledp: Shuffledp) -> None:
    """/proc passes the checks (root may write to it) but refuses a new folder: the one line
    still names --out, exit status 2."""
    outcome = shuffledp("experiment", "fig-1", "--out", "/proc/shuffledp-no-such-folder")
    assert outcome.code == 2 and outcome.out == ""
    assert outcome.err.count("\n") == 1
    assert "--out /proc/shuffledp-no-such-folder: " in outcome.err


@pytest.mark.parametrize("inside", [False, True])
def test_keys_init_into_a_file_is_refused_and_writes_nothing(
    shuffledp: Shuffledp, tmp_path: Path, inside: bool
) -> None:
    (tmp_path / "afile").write_text("x")
    target = tmp_path / "afile" / "keys" if inside else tmp_path / "afile"
    outcome = shuffledp("keys", "init", str(target))
    assert outcome.code == 2
    assert outcome.err.startswith(f"shuffledp keys init: error: DIR {target}: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
    assert (tmp_path / "afile").read_text() == "x"


# -- the checks themselves ---------------------------------------------------------------------


def test_output_file_rules(tmp_path: Path) -> None:
    existing = tmp_path / "report.json"
    existing.write_text("{}")
    assert check_output_file("--out", existing) == existing
    with pytest.raises(InvalidParameterError, match=r"already exists \(--overwrite replaces it\)"):
        check_output_file("--out", existing, overwrite=False)
    with pytest.raises(InvalidParameterError, match="is a folder"):
        check_output_file("--out", tmp_path)
    with pytest.raises(InvalidParameterError, match=r"report\.json is not a folder"):
        check_output_file("--out", existing / "x.json")
    fresh = tmp_path / "a" / "b" / "c.json"
    assert check_output_file("--out", fresh) == fresh
    assert not (tmp_path / "a").exists()  # checking creates nothing


def test_output_dir_rules(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert check_output_dir("--out", tmp_path) == tmp_path
    assert check_output_dir("--out", tmp_path / "new" / "sub") == tmp_path / "new" / "sub"
    assert not (tmp_path / "new").exists()
    with pytest.raises(InvalidParameterError, match="is a file, a folder is needed"):
        check_output_dir("--out", tmp_path / "f")
    with pytest.raises(InvalidParameterError, match="f is not a folder"):
        check_output_dir("--out", tmp_path / "f" / "sub")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_read_only_folder_is_refused(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(InvalidParameterError, match="is not writable"):
            check_output_file("--out", locked / "report.json")
        with pytest.raises(InvalidParameterError, match="not writable"):
            check_output_dir("--out", locked)
    finally:
        locked.chmod(0o700)


def test_input_file_rules(tmp_path: Path) -> None:
    present = tmp_path / "values.txt"
    present.write_text("1\n")
    assert check_input_file("--values", present) == present
    with pytest.raises(InvalidParameterError, match=r"^--values .*missing: no such file$"):
        check_input_file("--values", tmp_path / "missing")
    with pytest.raises(InvalidParameterError, match="is a folder, a file is needed"):
        check_input_file("--values", tmp_path)
