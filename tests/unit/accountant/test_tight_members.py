"""tight's members are data (tight.UPPER_MEMBERS, tight.LOWER_MEMBERS): a member is used iff its
refusal is None, and each refusal names the flag and the value in the user's words."""

from __future__ import annotations

import pytest

from shuffledp.accountant import ShuffledKRR, Tight
from shuffledp.accountant.tight import (
    LARGEST_GROUP_IN_TIGHT,
    LOWER_MEMBERS,
    UPPER_MEMBERS,
    with_largest_group,
)
from shuffledp.accountant.worst_case.k3_exhaustive import K3_MAX_N

CLONES = ["strong-adversary", "clones", "krr-clones"]


@pytest.mark.parametrize(
    ("n", "k", "expected"),
    [
        (10, 2, ["family-f(k=2, every a)", "optimal-blanket", *CLONES]),
        (K3_MAX_N, 3, ["exhaustive(k=3)", "optimal-blanket", *CLONES]),
        (K3_MAX_N + 1, 3, ["optimal-blanket", "largest-group", *CLONES]),
        (LARGEST_GROUP_IN_TIGHT, 10, ["optimal-blanket", "largest-group", *CLONES]),
        (LARGEST_GROUP_IN_TIGHT + 1, 10, ["optimal-blanket", *CLONES]),
        (10**6, 2, ["family-f(k=2, every a)", "optimal-blanket", *CLONES]),
    ],
)
def test_the_upper_members_are_those_that_do_not_refuse_in_their_order(
    n: int, k: int, expected: list[str]
) -> None:
    mech = ShuffledKRR(n=n, k=k, eps0=1.0)
    assert [bound.name for bound in Tight().upper_bounds(mech)] == expected
    used = [m.bound.name for m in UPPER_MEMBERS if m.refusal(mech) is None]
    assert used == expected
    assert with_largest_group(mech) == ("largest-group" in expected)


def test_each_refusal_names_the_flag_and_the_value() -> None:
    refusals = {m.bound.name: m.refusal(ShuffledKRR(n=1000, k=5, eps0=1.0)) for m in UPPER_MEMBERS}
    assert (
        refusals["family-f(k=2, every a)"] == "family-f(k=2, every a) applies only at --k 2, got 5"
    )
    assert refusals["exhaustive(k=3)"] == "exhaustive(k=3) applies only at --k 3, got 5"
    # the bound's own refusal first (largest-group: n <= MAX_N), then its place in tight
    assert refusals["largest-group"] == (
        "largest-group needs n <= 300 (its exact evaluation takes O(n^3) time), got n = 1000"
    )
    middle = {m.bound.name: m.refusal(ShuffledKRR(n=250, k=5, eps0=1.0)) for m in UPPER_MEMBERS}
    assert middle["largest-group"] == (
        f"largest-group is a member of tight only up to --n {LARGEST_GROUP_IN_TIGHT}, got 250"
    )
    assert refusals["optimal-blanket"] is None
    big_k3 = {m.bound.name: m.refusal(ShuffledKRR(n=500, k=3, eps0=1.0)) for m in UPPER_MEMBERS}
    assert big_k3["exhaustive(k=3)"] == (
        f"exhaustive(k=3) enumerates every dataset only up to --n {K3_MAX_N} (its work grows "
        "like n^5), got 500"
    )
    small_k3 = {m.bound.name: m.refusal(ShuffledKRR(n=50, k=3, eps0=1.0)) for m in UPPER_MEMBERS}
    assert small_k3["largest-group"] == (
        "largest-group is not needed where exhaustive(k=3) applies (the exact worst case)"
    )
    lower = {m.bound.name: m.refusal(ShuffledKRR(n=50, k=3, eps0=1.0)) for m in LOWER_MEMBERS}
    assert lower == {
        "wang-krr": "wang-krr is a member of tight only from --k 4, got 3",
        "single-bin": None,
    }


@pytest.mark.parametrize(("k", "wang", "single_bins"), [(2, 0, 0), (3, 0, 50), (4, 1, 50)])
def test_the_lower_members_after_f_are_those_that_do_not_refuse(
    k: int, wang: int, single_bins: int
) -> None:
    mech = ShuffledKRR(n=50, k=k, eps0=1.0)
    names = [bound.name for bound in Tight().lower_bounds(mech)]
    assert names.count("wang-krr") == wang
    assert names.count("single-bin") == single_bins
    nx0 = [b.parameters()["nx0"] for b in Tight().lower_bounds(mech) if b.name == "single-bin"]
    assert nx0 == list(range(single_bins))
