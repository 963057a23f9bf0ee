"""The optimal-blanket bound and the F(a) datasets against mpmath references.

tests/data/accountant_references.json holds 60-digit values of tests/reference/references.py, written by
tools/make_accountant_references.py (mpmath at n in the hundreds takes seconds per value, so they
are precomputed). The production classes OptimalBlanket and FamilyF(a) must bracket each
reference with a relative width of at most 1e-9 (below the normal double range, 2.2e-308, only
containment).

The references themselves are checked here against the checked values in docs/accounting.md, against brute
force over the G-form's categories, and against the 80-digit exhaustive oracle tests/reference/oracle.py
at small n; tests/reference/test_accountant_exhaustive.py checks them against the float exhaustive oracle.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections import defaultdict
from typing import Any

import mpmath
import pytest

from shuffledp.accountant import FamilyF, OptimalBlanket, ShuffledKRR
from tests.paths import TESTS_DATA
from tests.reference import oracle, references

DATA = TESTS_DATA / "accountant_references.json"
DOC: dict[str, Any] = json.loads(DATA.read_text())
RECORDS: list[dict[str, Any]] = DOC["records"]

#: the production bracket must contain the reference up to this relative slack ...
CONTAIN = 1e-12
#: ... and be at most this wide (upper / lower - 1)
WIDTH = 1e-9


def _id(r: dict[str, Any]) -> str:
    a = "" if r["a"] is None else f"-a{r['a']}"
    return f"{r['bound']}-n{r['n']}-k{r['k']}-eps0_{r['eps0']}-eps_{r['eps']}{a}"


def _mp(text: str) -> Any:
    with mpmath.workdps(references.DPS):
        return mpmath.mpf(text)


# ---------------------------------------------------------------------------------------------
# Production against the table


def _brackets_the_reference(record: dict[str, Any]) -> None:
    """Expected values: tests/data/accountant_references.json (tests/reference/references.py at 60 digits,
    20 significant digits kept). Exact zeros must come out as the bracket (0, 0)."""
    bound = OptimalBlanket() if record["bound"] == "optimal-blanket" else FamilyF(record["a"])
    mech = ShuffledKRR(n=record["n"], k=record["k"], eps0=record["eps0"])
    b = bound.bracket(mech, record["eps"])
    ref = _mp(record["value"])
    if ref == 0:
        assert (b.lower, b.upper) == (0.0, 0.0), b
        return
    if ref < sys.float_info.min:
        # below the normal double range (the table has a few, down to 1e-366): a double cannot
        # carry 1e-9 relative there, so containment only; an upper end of 0 would be unsafe
        with mpmath.workdps(references.DPS):
            assert mpmath.mpf(b.lower) <= ref <= mpmath.mpf(b.upper), (b, ref)
        return
    with mpmath.workdps(references.DPS):
        assert mpmath.mpf(b.lower) * (1 - mpmath.mpf(CONTAIN)) <= ref, (b, ref)
        assert ref <= mpmath.mpf(b.upper) * (1 + mpmath.mpf(CONTAIN)), (b, ref)
    general = record["bound"] == "family-f" and 0 < record["a"] < record["n"] - 1
    if general and record["k"] >= 3:
        # The dynamic programme's rigorous error bound grows like n |log p| ulp: its bracket is
        # allowed 1e-7, and its midpoint must still be within 1e-9 of the reference.
        with mpmath.workdps(references.DPS):
            mid = (mpmath.mpf(b.lower) + mpmath.mpf(b.upper)) / 2
            assert abs(mid / ref - 1) <= WIDTH, (b, ref)
        assert b.lower > 0 and b.upper / b.lower - 1 <= 1e-7, b
        return
    assert b.lower > 0 and b.upper / b.lower - 1 <= WIDTH, b


GROUPS = sorted({(r["bound"], r["n"]) for r in RECORDS})


@pytest.mark.parametrize(("bound", "n"), GROUPS)
def test_production_brackets_the_reference(bound: str, n: int) -> None:
    """Every record of the table for this bound and n (one test per group, not per record: 455
    records, each a few milliseconds; a failure names its record)."""
    records = [r for r in RECORDS if (r["bound"], r["n"]) == (bound, n)]
    assert records
    for record in records:
        try:
            _brackets_the_reference(record)
        except AssertionError as exc:
            raise AssertionError(f"{_id(record)}: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# The table itself


def test_table_metadata_and_coverage() -> None:
    """Expected: the generator's documented settings (tools/make_accountant_references.py)."""
    assert DOC["mpmath_dps"] >= 50 and DOC["significant_digits"] == 20
    kinds = {(r["bound"], r["a"] == 0, r["a"] == r["n"] - 1) for r in RECORDS}
    assert ("optimal-blanket", False, False) in kinds
    assert ("family-f", True, False) in kinds and ("family-f", False, True) in kinds
    general = {r["a"] for r in RECORDS if r["bound"] == "family-f" and 0 < r["a"] < r["n"] - 1}
    assert {1, 2} <= general
    values = [_mp(r["value"]) for r in RECORDS]
    assert sum(1 for v in values if v == 0) >= 4, "exact zeros (eps >= eps0)"
    assert min(v for v in values if v > 0) < mpmath.mpf("1e-100"), "tiny values"
    for r in RECORDS:
        assert (_mp(r["value"]) == 0) == (r["eps"] >= r["eps0"]), r


def test_table_matches_accounting_md() -> None:
    """Expected values: docs/accounting.md, "Reference values", n=100, k=10, eps0=2, eps=1: optimal-blanket
    4.797720777e-8, all-others-x2 (F(0)) 3.5602189e-8."""
    found = {
        (r["bound"], r["a"]): _mp(r["value"])
        for r in RECORDS
        if (r["n"], r["k"], r["eps0"], r["eps"]) == (100, 10, 2.0, 1.0)
    }
    with mpmath.workdps(references.DPS):
        assert abs(found[("optimal-blanket", None)] / mpmath.mpf("4.797720777e-8") - 1) < 1e-9
        assert abs(found[("family-f", 0)] / mpmath.mpf("3.5602189e-8") - 1) < 1e-7


def test_table_upper_bound_is_above_every_dataset() -> None:
    """Expected: optimal-blanket is a valid upper bound (docs/accounting.md 2b), so at every
    (n, k, eps0, eps) of the table it is >= every F(a) value there (each a concrete dataset's
    delta); and F(0) has equal directions (x0 <-> x1 symmetry) as the brief's G-form claims."""
    upper: dict[tuple[Any, ...], Any] = {}
    lowers: defaultdict[tuple[Any, ...], list[tuple[int, Any]]] = defaultdict(list)
    for r in RECORDS:
        key = (r["n"], r["k"], r["eps0"], r["eps"])
        if r["bound"] == "optimal-blanket":
            upper[key] = _mp(r["value"])
        else:
            lowers[key].append((r["a"], _mp(r["value"])))
            if r["a"] == 0:
                assert r["directions"][0] == r["directions"][1], r
    compared = 0
    for key, values in lowers.items():
        if key in upper:
            for a, v in values:
                assert v <= upper[key], (key, a, v, upper[key])
                compared += 1
    assert compared >= 100


@pytest.mark.parametrize(
    "record",
    [
        r
        for r in RECORDS
        if r["n"] == 100 and r["k"] in (3, 10) and r["eps0"] == 2.0 and r["eps"] == 0.5
    ],
    ids=_id,
)
def test_table_is_what_the_references_compute(record: dict[str, Any]) -> None:
    """Expected values: tests/reference/references.py recomputed now (catches a stale table)."""
    n, k, e0, e, a = (record[x] for x in ("n", "k", "eps0", "eps", "a"))
    if record["bound"] == "optimal-blanket":
        value = references.optimal_blanket_reference(n, k, e0, e)
    else:
        value = references.family_f_reference(n, k, e0, e, a)
    with mpmath.workdps(references.DPS):
        assert abs(value / _mp(record["value"]) - 1) < mpmath.mpf("1e-19")


# ---------------------------------------------------------------------------------------------
# The references against known answers, brute force and the 80-digit oracle


def test_optimal_blanket_matches_accounting_md_small_case() -> None:
    """Expected values: docs/accounting.md 2b, (n, k, eps0, eps) = (4, 3, 0.5, 0.3): optimal-blanket
    1.33633478e-2 and the true worst case 1.24612e-2 (tests/reference/oracle.py, 80 digits)."""
    value = references.optimal_blanket_reference(4, 3, 0.5, 0.3)
    worst, _ = oracle.worst_case_delta(4, 3, 0.5, 0.3)
    with mpmath.workdps(references.DPS):
        assert abs(value / mpmath.mpf("1.33633478e-2") - 1) < 1e-8
        assert abs(worst / mpmath.mpf("1.24612e-2") - 1) < 1e-5
        assert value > worst


@pytest.mark.parametrize(("k", "eps0", "eps"), [(2, 0.5, 0.1), (3, 2.0, 1.0), (10, 8.0, 0.05)])
def test_optimal_blanket_at_n1_is_krr(k: int, eps0: float, eps: float) -> None:
    """Expected value: docs/accounting.md 2b, n = 1 gives (E0 - Ee) / D, the delta of k-RR itself."""
    e0, ee, d, _, _ = references.params(k, eps0, eps)
    value = references.optimal_blanket_reference(1, k, eps0, eps)
    with mpmath.workdps(references.DPS):
        assert abs(value - (e0 - ee) / d) < mpmath.mpf("1e-55")


def _brute_g(n: int, values: list[Any], probs: list[Any]) -> Any:
    """(1/n) E[(G_1 + ... + G_n)_+] over all 4^n category sequences."""
    with mpmath.workdps(references.DPS):
        total = mpmath.mpf(0)
        for seq in itertools.product(range(4), repeat=n):
            s = mpmath.fsum(values[i] for i in seq)
            if s > 0:
                total += mpmath.fprod(probs[i] for i in seq) * s
        return total / n


@pytest.mark.parametrize(
    ("n", "k", "eps0", "eps"), [(3, 3, 0.5, 0.1), (5, 4, 2.0, 0.7), (6, 2, 1.0, 0.3)]
)
def test_g_form_summation_against_brute_force(n: int, k: int, eps0: float, eps: float) -> None:
    """Expected values: direct enumeration of every sequence of categories (mpmath)."""
    forms = [references.optimal_blanket_forms(k, eps0, eps)]
    e0, ee, _, pt, pb = references.params(k, eps0, eps)
    with mpmath.workdps(references.DPS):
        if k >= 3:
            forms.append(
                ([e0 - ee, 1 - ee * e0, (1 - ee) / e0, 1 - ee], [pb, pb, pt, (k - 3) * pb])
            )
        forms.append(([1 / e0 - ee, e0 - ee, 1 - ee, 0], [pt, pb, (k - 2) * pb, 0]))
    for values, probs in forms:
        got = references.g_form_delta(n, values, probs)
        want = _brute_g(n, values, probs)
        with mpmath.workdps(references.DPS):
            assert abs(got - want) <= mpmath.mpf("1e-50") * want, (got, want)


@pytest.mark.parametrize(
    ("n", "k", "eps0", "eps"),
    [(4, 3, 0.5, 0.3), (5, 4, 1.0, 0.2), (4, 2, 0.7, 0.1), (5, 5, 2.0, 0.5), (6, 3, 8.0, 4.0)],
)
def test_family_f_against_the_mpmath_oracle(n: int, k: int, eps0: float, eps: float) -> None:
    """Expected values: tests/reference/oracle.py's dataset_delta_pair (full histogram, DP over users, 80
    digits) of the dataset F(a), both directions, every a; and the brief's G-forms for F(0) and
    F(n-1) (docs/accounting.md / lead's derivation) equal those exact deltas."""
    third = 1 if k == 2 else 2
    for a in range(n):
        others = (0,) * a + (third,) * (n - 1 - a)
        want = oracle.dataset_delta_pair(others, k, eps0, eps)
        got = references.family_f_directions(n, k, eps0, eps, a)
        with mpmath.workdps(references.DPS):
            for g, w in zip(got, want, strict=True):
                assert abs(g - w) <= mpmath.mpf("1e-50") * max(w, mpmath.mpf("1e-300"))
    with mpmath.workdps(references.DPS):
        tol = mpmath.mpf("1e-50")
        if k >= 3:
            exact = oracle.dataset_delta_pair((2,) * (n - 1), k, eps0, eps)
            g0 = references.f0_g_form(n, k, eps0, eps)
            assert abs(g0 - exact[0]) <= tol * g0 and abs(g0 - exact[1]) <= tol * g0
        exact = oracle.dataset_delta_pair((0,) * (n - 1), k, eps0, eps)
        for g, w in zip(references.fall_g_form(n, k, eps0, eps), exact, strict=True):
            assert abs(g - w) <= tol * w


def test_family_f_exact_zero_from_eps0() -> None:
    """Expected: 0 exactly for eps >= eps0 (k-RR is eps0-LDP), both routes."""
    assert references.family_f_directions(6, 4, 1.0, 1.0, 2) == (0, 0)
    assert references.optimal_blanket_reference(6, 4, 1.0, 1.0) == 0
    assert references.f0_g_form(6, 4, 1.0, 1.5) == 0
    assert references.fall_g_form(6, 4, 1.0, 1.0) == (0, 0)
