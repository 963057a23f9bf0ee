"""`shuffledp hop --role/--worker` agree with the manifest's hop_workers, or the start is refused
in one line naming the flag (components._check_role)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from shuffledp.cli.components import _check_role
from shuffledp.errors import InvalidParameterError
from tests.manifests import make_manifest


def _args(**overrides: object) -> argparse.Namespace:
    fields: dict[str, object] = {
        "role": None,
        "worker": None,
        "state_dir": None,
        "brokers": ["mqtt://127.0.0.1:1883"],
        "manifest": Path("round.json"),
    }
    return argparse.Namespace(**(fields | overrides))


def test_one_process_hops_take_no_role() -> None:
    assert _check_role(_args(), make_manifest()) is False
    with pytest.raises(InvalidParameterError, match="hop_workers = 1"):
        _check_role(_args(role="mixer"), make_manifest())


@pytest.mark.parametrize(
    ("flags", "rule"),
    [
        ({}, "give --role peeler --worker P or --role mixer"),
        ({"role": "mixer", "worker": 0}, "--worker P goes with --role peeler"),
        ({"role": "peeler"}, "--worker P goes with --role peeler"),
        ({"role": "peeler", "worker": 2}, r"--worker must be in \[0, 1\]"),
        (
            {"role": "mixer", "brokers": ["mqtt://a:1", "mqtt://b:1"]},
            "--role mixer takes one --broker, got 2",
        ),
    ],
)
def test_a_role_that_contradicts_the_manifest_is_refused(
    flags: dict[str, object], rule: str
) -> None:
    with pytest.raises(InvalidParameterError, match=rule):
        _check_role(_args(**flags), make_manifest(hop_workers=2))


def test_a_peeler_and_the_mixer_of_a_two_worker_hop_start() -> None:
    manifest = make_manifest(hop_workers=2)
    assert _check_role(_args(role="peeler", worker=1), manifest) is True
    assert _check_role(_args(role="mixer"), manifest) is True
    # --state-dir: journal and crash resume (docs/hop-workers.md, "Crashes")
    assert _check_role(_args(role="mixer", state_dir=Path("s")), manifest) is True
    assert _check_role(_args(role="peeler", worker=0, state_dir=Path("s")), manifest) is True
