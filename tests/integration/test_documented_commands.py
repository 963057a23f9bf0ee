"""The README's and docs/deployment.md's commands, run literally as their Markdown shows them, in
a temporary folder whose `.venv` is this interpreter's environment.

- README, "The accountant": the `$ ` command prints exactly the lines shown under it.
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
import signal
import socket
import subprocess
import sys
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


def test_the_readme_account_command_prints_what_the_readme_shows(tmp_path: Path) -> None:
    block = _block_after(REPO_ROOT / "README.md", "**The accountant**", "console")
    command, *shown = block.splitlines()
    assert command.startswith("$ ")
    done = subprocess.run(
        ["bash", "-c", command.removeprefix("$ ")],
        cwd=_workdir(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == shown


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
