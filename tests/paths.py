"""Where the tests find things, whatever tier folder a test file sits in."""

from __future__ import annotations

from pathlib import Path

#: The repository's root (the folder holding pyproject.toml).
REPO_ROOT = Path(__file__).resolve().parent.parent
#: Data files committed with the tests (reference values).
TESTS_DATA = REPO_ROOT / "tests" / "data"
#: The real check-in slices shared next to the repository (never committed; tests that need them
#: are marked shared_data and skip when absent, except in CI).
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
#: The tiers (pyproject.toml's markers say how to run each): fast unit tests mirroring the
#: packages, slow numerical references (all marked ``slow``), and tests that start processes or
#: brokers (all marked ``integration``).
UNIT_TESTS = REPO_ROOT / "tests" / "unit"
REFERENCE_TESTS = REPO_ROOT / "tests" / "reference"
INTEGRATION_TESTS = REPO_ROOT / "tests" / "integration"
