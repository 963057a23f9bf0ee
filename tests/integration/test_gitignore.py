"""What the README's commands write into the work tree (key directories, results) is ignored by
git, so a `git add -A` after following the README commits no secret and no result."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.paths import REPO_ROOT


def _ignored(path: str) -> bool:
    done = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "check-ignore", "--quiet", "--no-index", path],
        capture_output=True,
        check=False,
        timeout=30,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


@pytest.mark.skipif(
    shutil.which("git") is None or not (REPO_ROOT / ".git").exists(),
    reason="not a git work tree",
)
@pytest.mark.parametrize(
    ("path", "ignored"),
    [
        ("keys/hop-0.key", True),  # `shuffledp keys init keys`
        ("keys/public.json", True),
        ("keys/access/analyzer.password", True),
        ("results/fig-2/SUMMARY-fig-2.md", True),  # `experiment ... --out results/`
        ("out/report.json", True),
        ("elsewhere/clients-0.clientkey", True),  # private files wherever they are
        ("deploy/hop-1.key", True),
        ("shuffledp/cli/main.py", False),  # the code is not
        ("deploy/mosquitto.conf", False),
        ("tests/data/accountant_references.json", False),
    ],
)
def test_keys_and_results_are_ignored(path: str, ignored: bool) -> None:
    assert _ignored(path) is ignored
