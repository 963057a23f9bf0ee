"""`account --json`'s `dataset`: the dataset behind tight's lower end, from its name."""

from __future__ import annotations

import json

from shuffledp.accountant.records import WitnessDataset
from shuffledp.cli.account import lower_dataset


def test_each_lower_end_name_gives_its_dataset() -> None:
    assert lower_dataset("counts(x0=1,x1=1,x2=97)") == WitnessDataset(
        family="counts", size=1, x1=1, x2=97
    )
    assert lower_dataset("family-f(a=4)") == WitnessDataset(family="F", size=4)
    assert lower_dataset("single-bin(nx0=5)") == WitnessDataset(family="single-bin", size=5)
    assert lower_dataset("none") is None


def test_counts_dataset_json_names_all_three_counts() -> None:
    record = lower_dataset("counts(x0=1,x1=1,x2=97)")
    assert record is not None
    assert json.loads(json.dumps(record.to_json())) == {
        "family": "counts",
        "x0": 1,
        "x1": 1,
        "x2": 97,
    }
