"""The `shuffledp account` command: JSON and table output, refusals, and one-line usage errors.

The tests drive :func:`shuffledp.cli.main` in-process (capsys); the installed command in a real
process is checked in tests/integration/test_cli_processes.py. Numbers printed by the CLI are compared with
the library (same process, so exactly equal), with the published / docs/accounting.md values, and with
the independent mpmath references in tests/reference/mpmath_pairs.py.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

import mpmath
import pytest

from tests.paths import REPO_ROOT

# `pytest` (unlike `python -m pytest`) does not put the repository root on sys.path while
# tests/ has no __init__.py; the references are imported as tests.reference.mpmath_pairs.
_ROOT = str(REPO_ROOT)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from shuffledp.accountant import (  # noqa: E402
    BOUND_NAMES,
    LargestGroup,
    ShuffledKRR,
    Tight,
    eps_for_delta,
    make_bound,
)
from shuffledp.cli import account as account_cli  # noqa: E402
from shuffledp.cli import main  # noqa: E402
from tests.reference import (  # noqa: E402
    mpmath_pairs,
    references,
)


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `shuffledp ARGV` run in-process.

    argparse usage errors leave through SystemExit; everything else through main's return value.
    """
    try:
        code = main(argv)
    except SystemExit as exc:
        assert isinstance(exc.code, int), exc.code
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    """Run a command that must succeed and print exactly one JSON object (one line)."""
    code, out, err = run(capsys, argv)
    assert code == 0, err
    assert err == ""
    assert out.endswith("\n") and out.count("\n") == 1, out
    data = json.loads(out)
    assert isinstance(data, dict)
    return data


def run_one(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    """`account --json` for one bound: its single result, with the mechanism's n, k, eps0 (the
    document's ``mechanism``) merged in for the checks below."""
    data = run_json(capsys, argv)
    assert len(data["results"]) == 1, data
    return {**data["mechanism"], **data["results"][0]}


def account(n: int, k: int, eps0: str, *rest: str) -> list[str]:
    return ["account", "--n", str(n), "--k", str(k), "--eps0", eps0, *rest]


# ----------------------------------------------------------------------------------------------
# delta at eps / eps at delta, default bound (tight)
# ----------------------------------------------------------------------------------------------

# (n, k, eps0, eps): the tight delta_upper is the minimum of the exact deltas of the four
# dominating pairs, each evaluated independently in mpmath (O(n^2) enumeration, tests/mpmath_pairs).
# (k = 3 at n <= 100 is excluded: tight's upper end there is the exact enumeration of every
# dataset, below the pairs' minimum; tests/reference/test_k3_exhaustive_mpmath.py checks it.)
EPS_CASES = [
    (100, 10, "2", "0.1"),
    (60, 4, "1", "0.3"),
    (200, 4, "2.5649493574615367", "0.5"),  # eps0 = ln 13 as a float
]


@pytest.mark.slow
@pytest.mark.parametrize(("n", "k", "eps0", "eps"), EPS_CASES)
def test_tight_delta_json_matches_library_and_mpmath(
    capsys: pytest.CaptureFixture[str], n: int, k: int, eps0: str, eps: str
) -> None:
    data = run_one(capsys, account(n, k, eps0, "--eps", eps, "--json"))
    assert {"bound", "n", "k", "eps0", "delta", "delta_lower", "delta_upper"} <= data.keys()
    assert data["bound"] == "tight"
    assert (data["n"], data["k"], data["eps0"]) == (n, k, float(eps0))
    assert data["delta"] == data["delta_upper"]
    assert data["delta_lower"] <= data["delta_upper"]

    mech = ShuffledKRR(n=n, k=k, eps0=float(eps0))
    lib = Tight().delta(mech, float(eps))
    assert data["delta"] == lib.delta
    assert data["delta_lower"] == lib.delta_lower
    assert data["delta_upper"] == lib.delta_upper

    # Independent value: min over the four dominating pairs of their exact delta (mpmath: the
    # optimal-blanket G-form by tests/reference/references.py, the others by full enumeration),
    # and largest-group (below optimal-blanket here; checked against its own mpmath reference in
    # tests/reference/test_largest_group.py). The reported guarantee is on the safe side of the
    # minimum and within float accuracy of it.
    group = LargestGroup().bracket(mech, float(eps))
    with mpmath.workdps(60):
        pairs = min(
            references.optimal_blanket_reference(n, k, float(eps0), float(eps)),
            max(mpmath_pairs.strong_adversary(n, k, float(eps0), float(eps))),
            max(mpmath_pairs.clones(n, float(eps0), float(eps))),
            max(mpmath_pairs.krr_clones(n, k, float(eps0), float(eps))),
        )
        assert group.upper < pairs
        assert data["delta_upper"] >= group.lower
        assert data["delta_upper"] <= group.upper * (1 + mpmath.mpf("1e-8"))


@pytest.mark.parametrize(("n", "k", "eps0", "delta"), [(100, 10, "2", "1e-6")])
def test_tight_eps_json_matches_library(
    capsys: pytest.CaptureFixture[str], n: int, k: int, eps0: str, delta: str
) -> None:
    data = run_one(capsys, account(n, k, eps0, "--delta", delta, "--json"))
    assert {"bound", "n", "k", "eps0", "delta", "eps", "eps_lower", "eps_upper"} <= data.keys()
    assert data["bound"] == "tight"
    assert data["delta"] == float(delta)
    assert data["eps"] == data["eps_upper"]
    assert 0.0 <= data["eps_lower"] <= data["eps_upper"]

    mech = ShuffledKRR(n=n, k=k, eps0=float(eps0))
    lib = eps_for_delta(Tight(), mech, float(delta))
    assert (data["eps"], data["eps_lower"], data["eps_upper"]) == (
        lib.eps,
        lib.eps_lower,
        lib.eps_upper,
    )
    # The printed eps is a guarantee: the valid upper bound meets the target there.
    assert Tight().bracket(mech, data["eps"]).upper <= float(delta)


# ----------------------------------------------------------------------------------------------
# single-bin: docs/accounting.md, "Reference values", exact H(P0 || P1) at n=100, k=10, eps0=2, nx0=80
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("eps", "published"),
    [
        ("0.1", 6.1467e-3),  # docs/accounting.md, "biswas-literal" table, "exact" column
        ("0.5", 2.6062e-8),
        ("1.0", 2.6981e-18),
    ],
)
def test_single_bin_directions_match_accounting_table(
    capsys: pytest.CaptureFixture[str], eps: str, published: float
) -> None:
    data = run_one(
        capsys,
        [
            "account",
            "--bound",
            "single-bin",
            "--nx0",
            "80",
            "--n",
            "100",
            "--k",
            "10",
            "--eps0",
            "2",
            "--eps",
            eps,
            "--json",
        ],
    )
    assert data["bound"] == "single-bin"
    assert data["nx0"] == 80
    d01, d10 = data["delta_x0_over_x1"], data["delta_x1_over_x0"]
    # 4 significant digits: within half a unit of the 4th digit.
    ulp = 10.0 ** (math.floor(math.log10(published)) - 3)
    assert abs(d01 - published) <= ulp / 2
    assert data["delta"] == max(d01, d10)
    # Both directions agree with the plain mpmath enumeration of the pair.
    with mpmath.workdps(60):
        h01, h10 = mpmath_pairs.single_bin(100, 10, 2, 80, float(eps))
        for got, ref in ((d01, h01), (d10, h10)):
            assert abs(got - ref) <= ref * mpmath.mpf("1e-8") + mpmath.mpf("1e-300")
            assert got >= ref * (1 - mpmath.mpf("1e-12"))  # upper side of the bracket


# ----------------------------------------------------------------------------------------------
# --bound all
# ----------------------------------------------------------------------------------------------


def test_bound_all_json_lists_every_bound_and_refusals(capsys: pytest.CaptureFixture[str]) -> None:
    # eps0 = 2 > 0.5: erlingsson must refuse; eps = 0.1 is below blanket-analytic's
    # 27k/((n-1) gamma), so it must refuse too.
    data = run_json(
        capsys, account(100, 10, "2", "--eps", "0.1", "--nx0", "80", "--bound", "all", "--json")
    )
    rows = {row["bound"]: row for row in data["results"]}
    assert len(rows) == len(data["results"])
    assert set(rows) == set(BOUND_NAMES)

    erl = rows["erlingsson"]
    assert erl["delta"] is None
    assert "eps0 <= 0.5" in erl["error"]
    blanket = rows["blanket-analytic"]
    assert blanket["delta"] is None
    assert "27k/((n-1)gamma) <= eps" in blanket["error"]

    mech = ShuffledKRR(n=100, k=10, eps0=2.0)
    for name, row in rows.items():
        if row["error"] is not None:
            continue
        # Every number equals what the library gives for that bound.
        assert row["delta"] == make_bound(name, 80).delta(mech, 0.1).delta, name
    assert rows["tight"]["delta"] == min(
        rows[name]["delta"]
        for name in ("optimal-blanket", "largest-group", "strong-adversary", "clones", "krr-clones")
    )
    # largest-group keeps the largest group hidden: never above optimal-blanket, here below it
    assert rows["largest-group"]["delta"] < rows["optimal-blanket"]["delta"]
    assert rows["tight"]["delta_lower"] >= rows["wang-krr"]["delta"]
    assert rows["tight"]["delta_lower"] >= rows["family-f"]["delta"]
    assert rows["tight"]["delta_lower"] >= rows["single-bin"]["delta_lower"]


def test_bound_all_json_analytic_bounds_inside_their_conditions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # n = 1000, k = 4, eps0 = 0.4, eps = 0.38: inside both analytic bounds' conditions
    # (erlingsson: eps0 <= 0.5, n >= 1000, eps <= eps0, delta <= 0.01; blanket-analytic:
    # 27k/((n-1) gamma) = 0.121 <= eps <= 1).
    n, k, eps0, eps = 1000, 4, 0.4, 0.38
    data = run_json(capsys, account(n, k, "0.4", "--eps", "0.38", "--bound", "all", "--json"))
    rows = {row["bound"]: row for row in data["results"]}
    # Erlingsson et al. 2019: delta = exp(-n (eps / (12 eps0))^2) = exp(-6.267) = 1.897e-3.
    assert rows["erlingsson"]["delta"] == pytest.approx(
        math.exp(-n * (eps / (12 * eps0)) ** 2), rel=1e-12
    )
    # Balle et al. 2019 Thm 3.1: delta = 2 exp(-(n-1) gamma eps^2 / (14 k)),
    # gamma = k / (e^eps0 + k - 1).
    gamma = k / (math.exp(eps0) + k - 1)
    expected = 2 * math.exp(-(n - 1) * gamma * eps**2 / (14 * k))  # = 0.2017
    assert rows["blanket-analytic"]["delta"] == pytest.approx(expected, rel=1e-12)
    # Every bound is listed; without --nx0 the two nx0 bounds are refused with the reason.
    assert set(rows) == set(BOUND_NAMES)
    for name in ("single-bin", "biswas-literal"):
        assert rows[name]["delta"] is None
        assert "--nx0" in rows[name]["error"]


@pytest.mark.parametrize("target", [["--eps", "0.1"], ["--delta", "1e-6"]])
def test_bound_all_table(capsys: pytest.CaptureFixture[str], target: list[str]) -> None:
    code, out, err = run(capsys, account(100, 10, "2", *target, "--nx0", "80", "--bound", "all"))
    assert code == 0, err
    assert err == ""
    lines = out.splitlines()
    first_words = [line.split(" ", 1)[0] for line in lines]
    for name in BOUND_NAMES:
        assert name in first_words, name
    erl = lines[first_words.index("erlingsson")]
    # A refusal reason in place of a number.
    assert "n/a" in erl and "refused:" in erl and "eps0 <= 0.5" in erl
    assert not re.search(r"\d\.\d*e-\d", erl.split("refused:")[0])
    # A valid bound shows its number: clones at eps = 0.1 / its eps at delta = 1e-6.
    mech = ShuffledKRR(n=100, k=10, eps0=2.0)
    clones_line = lines[first_words.index("clones")]
    if target[0] == "--eps":
        value = make_bound("clones").delta(mech, 0.1).delta
    else:
        value = eps_for_delta(make_bound("clones"), mech, 1e-6).eps
    assert f"{value:.6g}" in clones_line.split()


# ----------------------------------------------------------------------------------------------
# --rounds
# ----------------------------------------------------------------------------------------------


@pytest.mark.slow  # 10-15 s (one eps: 0.5 re-checked the same ordering at the same cost)
def test_rounds_delta_not_below_one_round(capsys: pytest.CaptureFixture[str]) -> None:
    eps = "1"
    one = run_one(capsys, account(100, 10, "2", "--eps", eps, "--json"))
    three = run_one(capsys, account(100, 10, "2", "--eps", eps, "--rounds", "3", "--json"))
    assert three["rounds"] == 3
    assert three["eps"] == float(eps)
    # Composition never lowers delta (the 1-round view is a post-processing of the 3-round
    # view); the pessimistic PLD only rounds further up.
    assert one["delta"] <= three["delta"] <= 1.0
    # The bracket: the lower end (one dataset pair in every round) is below the guarantee, and
    # not below the one-round lower end (3 rounds of a pair only raise its delta).
    assert one["delta_lower"] <= three["delta_lower"] <= three["delta_upper"] == three["delta"]
    assert three["ratio"] == pytest.approx(three["delta_upper"] / three["delta_lower"])


@pytest.mark.slow
def test_rounds_optimal_blanket_pair_too_large_to_list(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 25: this ended in a bare AssertionError (optimal-blanket's listed pair was over its
    outcome cap). Now the pair comes from the one-round profile: an answer, with both ends."""
    args = ["--delta", "1e-6", "--rounds", "10", "--bound", "optimal-blanket", "--json"]
    out = run_one(capsys, account(10000, 10, "1", *args))
    assert out["composition"] == "pld" and out["upper_from"] == "optimal-blanket"
    assert 0.0 < out["eps_lower"] <= out["eps_upper"] == out["eps"]
    assert out["eps_upper"] <= 1.05 * out["eps_lower"]


# ----------------------------------------------------------------------------------------------
# Bad input: exit code 2, one line on stderr naming the rule / value, nothing on stdout
# ----------------------------------------------------------------------------------------------

BASE = ["--n", "10", "--k", "3", "--eps0", "1"]

BAD_INPUT = [
    (["--n", "1", "--k", "3", "--eps0", "1", "--eps", "0.1"], "--n must be >= 2, got 1"),
    (["--n", "10", "--k", "1", "--eps0", "1", "--eps", "0.1"], "--k must be >= 2, got 1"),
    (["--n", "10", "--k", "3", "--eps0", "0", "--eps", "0.1"], "--eps0 must be > 0, got 0"),
    (["--n", "10", "--k", "3", "--eps0", "nan", "--eps", "0.1"], "--eps0 must be finite, got nan"),
    (["--n", "10", "--k", "3", "--eps0", "inf", "--eps", "0.1"], "--eps0 must be finite, got inf"),
    ([*BASE, "--eps", "-1"], "--eps must be >= 0, got -1"),
    ([*BASE, "--eps", "nan"], "--eps must be finite"),
    ([*BASE, "--delta", "0"], "--delta must be in (0, 1), got 0"),
    ([*BASE, "--delta", "1.5"], "--delta must be in (0, 1), got 1.5"),
    ([*BASE, "--eps", "0.1", "--bound", "no-such-bound"], "invalid choice: 'no-such-bound'"),
    ([*BASE, "--eps", "0.1", "--bound", "single-bin"], "needs nx0 (--nx0 M)"),
    (
        [*BASE, "--eps", "0.1", "--bound", "single-bin", "--nx0", "10"],
        "--nx0 must be in [0, n-1] = [0, 9], got 10",
    ),
    ([*BASE, "--eps", "0.1", "--bound", "single-bin", "--nx0", "-1"], "--nx0 must be >= 0, got -1"),
    ([*BASE, "--eps", "0.1", "--delta", "0.01"], "not allowed with argument"),
    ([*BASE, "--eps", "0.1", "--rounds", "0"], "--rounds must be in [1, 100000], got 0"),
    (
        [*BASE, "--eps", "0.1", "--rounds", "1000000"],
        f"--rounds must be in [1, {account_cli.MAX_ROUNDS}], got 1000000",
    ),
    ([*BASE, "--delta", "-1e-6"], "--delta must be in (0, 1), got -1e-6"),
    ([*BASE, "--eps", "-2.5E+1"], "--eps must be >= 0, got -2.5E+1"),
    (
        [*BASE, "--eps", "0.1", "--nx0", "3"],
        "--nx0 applies to the bounds of one dataset (single-bin, biswas-literal), not --bound "
        "tight",
    ),
    ([*BASE, "--eps", "0.1", "--nx0", "3", "--bound", "optimal-blanket"], "not --bound optimal"),
    ([*BASE, "--eps", "0.1", "--rounds", "2", "--bound", "all"], "--rounds"),
    (
        [*BASE, "--eps", "0.1", "--rounds", "2", "--bound", "biswas-literal", "--nx0", "3"],
        "biswas-literal is of kind not-a-guarantee",
    ),
    ([*BASE, "--eps", "0.1", "--rounds", "2", "--bound", "family-f"], "family-f is of kind lower"),
    (
        ["--n", "2.5", "--k", "3", "--eps0", "1", "--eps", "0.1"],
        "--n must be an integer (e.g. 1000 or 1e6), got '2.5'",
    ),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUT)
def test_bad_input_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = run(capsys, ["account", *args])
    assert code == 2
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert err.startswith("shuffledp account: error: ")
    assert message in err


def test_audit_cli_default_trials_is_the_audit_default() -> None:
    from shuffledp.cli import audit as audit_cli
    from shuffledp.simulations.audit import empirical

    assert audit_cli.DEFAULT_TRIALS == empirical.DEFAULT_TRIALS


def test_a_small_round_is_warned_about_below_the_stated_minimum(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """simulate and stream warn (one line on stderr) for a round below MIN_USEFUL_ROUND
    reports, and only then."""
    from shuffledp.cli.simulate import MIN_USEFUL_ROUND, warn_small_round

    assert warn_small_round("simulate", MIN_USEFUL_ROUND, 15) is False
    assert capsys.readouterr().err == ""
    assert warn_small_round("simulate", MIN_USEFUL_ROUND - 1, 15) is True
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"shuffledp simulate: warning: a round of {MIN_USEFUL_ROUND - 1} ")


def test_many_rounds_say_on_stderr_that_they_compose(capsys: pytest.CaptureFixture[str]) -> None:
    rounds = account_cli.SLOW_ROUNDS
    code, _, err = run(capsys, ["account", *BASE, "--eps", "1", "--rounds", str(rounds)])
    assert (
        code == 0
        and err
        == f"shuffledp account: composing over {rounds:,} rounds (up to "
        f"about 30 s at {account_cli.MAX_ROUNDS:,})...\n"
    )


def test_every_bound_name_has_its_one_line_meaning_in_help() -> None:
    from shuffledp.accountant.registry import BOUND_NAMES

    assert tuple(account_cli.BOUND_MEANINGS) == BOUND_NAMES
