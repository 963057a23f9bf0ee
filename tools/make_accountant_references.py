"""Precompute mpmath reference values for the optimal-blanket bound and the F(a) datasets.

Writes tests/data/accountant_references.json, read by tests/reference/test_accountant_references.py (the
references cost seconds each at n = 500 in mpmath, too slow to recompute in the test run).

Every value comes from tests/reference/references.py at its DPS (60) digits, and each is computed twice by
independent routes wherever two exist, the generator refusing to write on a disagreement beyond
1e-40 relative:

* ``optimal-blanket``: the G-form (1/n) E[(G_1 + ... + G_n)_+] of docs/accounting.md ("optimal-blanket")
  (one route only; it is checked at small n by tests/reference/test_accountant_exhaustive.py).
* ``family-f`` with a = 0: the brief's G-form for F(0) and the sufficient-count computation
  family_f_directions (both directions).
* ``family-f`` with a = n - 1: the brief's two G-forms (H(P||Q), H(Q||P)) and family_f_directions.
* ``family-f`` with other a: family_f_directions only.

eps0 and eps are binary doubles (the JSON numbers), converted to mpmath exactly, so a record
means exactly what ``ShuffledKRR(n=n, k=k, eps0=eps0)`` and ``bracket(mech, eps)`` compute for.
Values are strings with 20 significant digits.

Usage: PYTHONPATH=. .venv/bin/python tools/make_accountant_references.py [--jobs 2]
(about 10 minutes on 2 cores with gmpy2 installed, which mpmath uses when present).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import mpmath

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.reference import references  # noqa: E402

OUT = ROOT / "tests" / "data" / "accountant_references.json"
DIGITS = 20
AGREE = "1e-40"

NS = (100, 200, 500)
KS = (2, 3, 10, 100)
EPS0S = (0.5, 2.0, 8.0)
EPSS = (0.05, 0.5, 1.0)
# exact zeros (eps >= eps0): kept only at n = 100, so the zero path is checked once per k
ZERO_N = 100
# tiny values: far tails at large n (1e-100 and below)
TINY = ((500, 2, 2.0, 1.5), (500, 3, 2.0, 1.5), (500, 10, 0.5, 0.45), (200, 2, 8.0, 6.0))

GENERAL_NS = (40, 100)
GENERAL_KS = (2, 3, 10)

Task = tuple[str, int, int, float, float, int | None]


def tasks() -> list[Task]:
    out: list[Task] = []
    grid = [(n, k, e0, e) for n, k, e0, e in itertools.product(NS, KS, EPS0S, EPSS)]
    grid += list(TINY)
    for n, k, e0, e in grid:
        if e >= e0 and n != ZERO_N:
            continue
        out.append(("optimal-blanket", n, k, e0, e, None))
        if k >= 3:
            out.append(("family-f", n, k, e0, e, 0))
        out.append(("family-f", n, k, e0, e, n - 1))
    for n, k in itertools.product(GENERAL_NS, GENERAL_KS):
        for a in sorted({1, 2, n // 2, n - 2}):
            # one task per (n, k, eps0, a): the law is shared by the eps values
            for e0 in EPS0S:
                out.append(("family-f-many", n, k, e0, -1.0, a))
    return out


def _s(x: Any) -> str:
    with mpmath.workdps(references.DPS):
        return "0" if x == 0 else mpmath.nstr(x, DIGITS, min_fixed=1, max_fixed=0)


def _agree(x: Any, y: Any, what: str) -> None:
    with mpmath.workdps(references.DPS):
        if x == y == 0:
            return
        if abs(x - y) > mpmath.mpf(AGREE) * max(abs(x), abs(y)):
            raise AssertionError(f"{what}: {x} != {y}")


def run(task: Task) -> list[dict[str, Any]]:
    bound, n, k, e0, e, a = task
    t = time.perf_counter()
    if bound == "optimal-blanket":
        value = references.optimal_blanket_reference(n, k, e0, e)
        rec: dict[str, Any] = {"directions": None, "checked_by": []}
        recs = [(e, a, value, rec)]
    elif bound == "family-f" and a == 0:
        g = references.f0_g_form(n, k, e0, e)
        pq, qp = references.family_f_directions(n, k, e0, e, 0)
        _agree(g, pq, f"F(0) G-form vs counts H(P||Q) {task}")
        _agree(g, qp, f"F(0) G-form vs counts H(Q||P) {task}")
        value = max(pq, qp)
        recs = [(e, a, value, {"directions": [_s(pq), _s(qp)], "checked_by": ["g-form"]})]
    elif bound == "family-f":
        g_pq, g_qp = references.fall_g_form(n, k, e0, e)
        pq, qp = references.family_f_directions(n, k, e0, e, n - 1)
        _agree(g_pq, pq, f"F(n-1) G-form vs counts H(P||Q) {task}")
        _agree(g_qp, qp, f"F(n-1) G-form vs counts H(Q||P) {task}")
        value = max(pq, qp)
        recs = [(e, a, value, {"directions": [_s(pq), _s(qp)], "checked_by": ["g-form"]})]
    else:
        assert a is not None
        epss = [x for x in EPSS if x < e0] + ([e0] if e0 <= max(EPSS) else [])
        values = references.family_f_directions_many(n, k, e0, epss, a)
        recs = [
            (x, a, max(pq, qp), {"directions": [_s(pq), _s(qp)], "checked_by": []})
            for x, (pq, qp) in zip(epss, values, strict=True)
        ]
        bound = "family-f"
    seconds = time.perf_counter() - t
    return [
        {
            "bound": bound,
            "n": n,
            "k": k,
            "eps0": e0,
            "eps": x,
            "a": aa,
            "value": _s(v),
            **extra,
            "seconds": round(seconds / len(recs), 2),
        }
        for x, aa, v, extra in recs
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    todo = tasks()
    # the slow ones first, so the pool's tail is short
    todo.sort(key=lambda t: -t[1] * (1 + (t[0] == "family-f")))
    records: list[dict[str, Any]] = []
    start = time.perf_counter()
    with Pool(args.jobs) as pool:
        for done, recs in enumerate(pool.imap_unordered(run, todo), 1):
            records += recs
            if done % 20 == 0:
                print(f"{done}/{len(todo)} tasks, {time.perf_counter() - start:.0f} s", flush=True)
    records.sort(key=lambda r: (r["bound"], r["n"], r["k"], r["eps0"], r["eps"], r["a"] or 0))
    doc = {
        "generator": "tools/make_accountant_references.py",
        "references": "tests/reference/references.py",
        "mpmath_dps": references.DPS,
        "significant_digits": DIGITS,
        "mpmath_backend": mpmath.libmp.BACKEND,
        "model": (
            "shuffled k-RR, full histogram; family-f: max(H(P||Q), H(Q||P)) of the dataset F(a) "
            "(a others hold x0, the rest one value x2, or x1 for k = 2); optimal-blanket: "
            "(1/n) E[(G_1 + ... + G_n)_+] of docs/accounting.md (optimal-blanket). eps0 and eps are the "
            "binary doubles of the JSON numbers."
        ),
        "records": records,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(records)} records in {time.perf_counter() - start:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
