"""The README's and docs/deployment.md's commands, run literally as their Markdown shows them, in
a temporary folder whose `.venv` is this interpreter's environment.

- README, "The accountant": the `$ ` command prints exactly the lines shown under it.
- README, "A full simulation": the `$ ` command, run as shown (the default round of 10,000 on
  `--broker auto`), prints the lines shown under it, numbers and histogram bars aside (they vary
  from run to run; the broker too: Mosquitto where it is installed).
- README, "The paper's evaluation": `data fetch gowalla` cannot reach the network here and has no
  address override, so it runs with the proxy pointed at a closed port and must fail with one
  line naming the URL, saving nothing; the `experiment` line runs with its documented flags
  (`--out results/ --seed 2026`) on the cheapest experiment, `table-4` (its full grid is the
  quick one: a few seconds), instead of `all` (about 5 minutes).
- README, "The tests": the command is not run (it would run this suite); it parses, and the
  pytest configuration it relies on names the existing tests folder.
- All of them with an empty HOME and no cache variables set (a fresh account).
- deployment.md, "Each component on its own": `keys init` and `round init` first, then every
  other line started
  at once in a random order (each may run on another machine; the broker is not first): the
  analyzer prints the round's summary with every report received. The block uses the default
  broker address 127.0.0.1:1883, so the test skips where that port is taken on this host.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT


def _block_after(doc: Path, heading: str, fence: str) -> str:
    text = doc.read_text(encoding="utf-8")
    start = text.index(heading)
    found = re.search(rf"```{fence}\n(.*?)\n```", text[start:], flags=re.DOTALL)
    assert found is not None, f"no ```{fence} block after {heading!r} in {doc.name}"
    return found.group(1)


def _workdir(tmp_path: Path) -> Path:
    """A folder whose .venv/bin/shuffledp is this environment's command."""
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    assert (tmp_path / ".venv" / "bin" / "shuffledp").exists()
    return tmp_path


def _fresh_env(tmp_path: Path) -> dict[str, str]:
    """This environment with an empty HOME and no shuffledp or XDG cache setting."""
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v for k, v in os.environ.items() if k not in ("SHUFFLEDP_CACHE_DIR", "XDG_CACHE_HOME")
    }
    return {**env, "HOME": str(home)}


def _commands(block: str) -> list[str]:
    """The command lines of a Markdown block (``$ `` lines of a console block, else every
    line), comments dropped."""
    lines = [line for line in block.splitlines() if line.strip()]
    if any(line.startswith("$ ") for line in lines):
        lines = [line.removeprefix("$ ") for line in lines if line.startswith("$ ")]
    return [line.split("  #")[0].strip() for line in lines]


def test_the_readme_account_command_prints_what_the_readme_shows(tmp_path: Path) -> None:
    block = _block_after(REPO_ROOT / "README.md", "**The accountant**", "console")
    command, *shown = block.splitlines()
    assert command.startswith("$ ")
    done = subprocess.run(
        ["bash", "-c", command.removeprefix("$ ")],
        cwd=_workdir(tmp_path),
        env=_fresh_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == shown


_NUMBER = re.compile(r"\d[\d.,]*(?:e[+-]?\d+)?")


def _shape(line: str) -> str:
    """A line of simulate's output without what varies between runs: numbers, the histogram's
    bars, the columns' padding, and the broker's description (--broker auto picks Mosquitto
    where it is installed)."""
    line = re.sub(r"broker: .*", "broker: B", line)
    return " ".join(re.sub(r"[#|]+ *[#|]*$", "", _NUMBER.sub("N", line)).split())


def _readme_evaluation_commands() -> tuple[str, str]:
    block = _block_after(REPO_ROOT / "README.md", "**The paper's evaluation**", "sh")
    fetch, experiment = _commands(block)
    assert fetch.endswith(" data fetch gowalla"), fetch
    assert " experiment all " in experiment, experiment
    return fetch, experiment


def test_the_readme_simulate_and_evaluation_commands_run_as_written(tmp_path: Path) -> None:
    """The simulate command (in the background) while the evaluation block's two lines run:
    both of a fresh account (empty HOME), in a temporary folder."""
    block = _block_after(REPO_ROOT / "README.md", "**A full simulation**", "console")
    (simulate,) = _commands(block)
    shown = [line for line in block.splitlines()[1:]]
    cwd, env = _workdir(tmp_path), _fresh_env(tmp_path)
    running = subprocess.Popen(
        ["bash", "-c", simulate], cwd=cwd, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _check_evaluation_commands(cwd, env)
        out, err = running.communicate(timeout=240)
    finally:
        if running.poll() is None:
            running.terminate()
            running.wait(timeout=30)
    assert running.returncode == 0, err
    printed = out.splitlines()
    assert len(printed) == len(shown), out
    for line, expected in zip(printed, shown, strict=True):  # the README's "..." elides
        pattern = ".*".join(re.escape(part) for part in _shape(expected).split("..."))
        assert re.fullmatch(pattern, _shape(line)), (line, expected)
    assert out.splitlines()[0].startswith("round 1: 10000 of 10000 reports received; k = 15, ")


def _check_evaluation_commands(cwd: Path, env: dict[str, str]) -> None:
    fetch, experiment = _readme_evaluation_commands()
    closed = "http://127.0.0.1:9"  # the discard port: nothing listens (connection refused)
    offline = {k: v for k, v in env.items() if k.lower() != "no_proxy"}
    offline |= {name: closed for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")}
    done = subprocess.run(
        ["bash", "-c", fetch], cwd=cwd, env=offline, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == "" and done.stderr.count("\n") == 1, done
    assert "cannot download https://snap.stanford.edu/" in done.stderr, done.stderr
    assert "nothing was saved" in done.stderr
    # (simulate may have built the Mosquitto plugin into the cache meanwhile)
    assert not list(Path(env["HOME"]).rglob("loc-gowalla*")), "a partial download was kept"
    cheapest = experiment.replace(" experiment all ", " experiment table-4 ")
    done = subprocess.run(
        ["bash", "-c", cheapest], cwd=cwd, env=env, capture_output=True, text=True, timeout=180,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = cwd / "results" / "SUMMARY-table-4.md"
    assert f"summary: results/{summary.name}" in done.stdout.replace(str(cwd) + "/", "")
    expected = REPO_ROOT / "docs" / "evaluation" / "table-4" / summary.name
    assert summary.read_bytes() == expected.read_bytes()  # --seed 2026, as docs/evaluation


def test_the_readme_test_command_parses_and_names_the_tests_folder() -> None:
    """Not run (it would run this suite): `.venv/bin/python -m pytest`, whose configuration
    (pyproject.toml's testpaths) names the tests folder, which exists."""
    block = _block_after(REPO_ROOT / "README.md", "**The tests**", "console")
    (command,) = _commands(block)
    python, *args = shlex.split(command)
    assert python == ".venv/bin/python" and args[:2] == ["-m", "pytest"], command
    assert all((REPO_ROOT / arg).exists() for arg in args[2:] if not arg.startswith("-"))
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    testpaths = config["tool"]["pytest"]["ini_options"]["testpaths"]
    assert testpaths == ["tests"] and (REPO_ROOT / "tests" / "integration").is_dir()


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_the_deployment_pages_components_started_in_any_order(tmp_path: Path) -> None:
    if not _port_free(1883):
        pytest.skip("127.0.0.1:1883, the address the page's commands use, is taken here")
    block = _block_after(REPO_ROOT / "docs" / "deployment.md", "## Each component on its own", "sh")
    lines = [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    keys, manifest, *rest = lines
    assert " keys init " in keys and " round init " in manifest
    cwd = _workdir(tmp_path)
    for setup in (keys, manifest):  # the key directory, then the round's manifest
        subprocess.run(["bash", "-c", setup], cwd=cwd, check=True, capture_output=True, timeout=60)
    random.shuffle(rest)
    started = {
        line: subprocess.Popen(
            ["bash", "-c", line.removesuffix("&").strip()],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # the hops of the `for` line stay in this group
        )
        for line in rest
    }
    try:
        analyzer = next(p for line, p in started.items() if " analyzer " in line)
        clients = next(p for line, p in started.items() if " clients " in line)
        out, err = analyzer.communicate(timeout=180)
        assert analyzer.returncode == 0, (rest, err)
        assert out.startswith("round "), out
        expected = re.search(r" round init .* --n (\d+)", block)
        assert expected is not None
        n = expected.group(1)
        assert f": {n} of {n} reports received;" in out.splitlines()[0]
        clients.communicate(timeout=60)
        assert clients.returncode == 0
    finally:
        for process in started.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
