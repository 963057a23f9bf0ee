"""`shuffledp audit`: the command line of :mod:`shuffledp.simulations.audit.empirical`.

``shuffledp audit --n N --k K --eps0 E0 --eps E [--dataset worst | single-bin --nx0 M]
[--trials T] [--seed S] [--json]`` runs the mechanism T times on each dataset of a neighbouring
pair and prints a one-sided 95 % lower confidence bound ``delta_lower_ci`` on delta at eps, the
region and counts it came from, and every bound's value at (n, k, eps0, eps) with its label.

Exit status: 0 when the audit is consistent with the valid guarantee (delta_lower_ci <=
delta_upper); 1 when it is not (a 5 % event, or a guarantee that does not hold: the report is
printed and one line on stderr says so); 2 for bad options (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shuffledp.cli.account import format_value
from shuffledp.cli.argtypes import integer, non_negative, positive
from shuffledp.cli.help import add_command

if TYPE_CHECKING:
    from shuffledp.simulations.audit.empirical import AuditResult

# The audit module (scipy.stats, the accountant) is imported only when `audit` runs: every
# `shuffledp` process, hops and clients included, builds this parser (it cost each one 50 MiB
# and 1 s at start-up). tests/unit/simulations/test_audit.py checks this equals audit.DEFAULT_TRIALS.
DEFAULT_TRIALS = 200_000

__all__ = ["add_parser", "format_result", "run"]


def add_parser(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "audit",
        help="empirical privacy audit: a 95 %% lower confidence bound on delta from runs of "
        "the mechanism, beside every bound",
        description="Run shuffled k-RR T times on each dataset of a neighbouring pair (user u "
        "holds x0=0 under P, x1=1 under Q), choose a rejection region on half of the trials "
        "(thresholds on the exact privacy loss of the counts (h_x0, h_x1) when n is small "
        "enough, else on h_x0 - h_x1) and measure it on the other half: delta_lower_ci = "
        "Clopper-Pearson lower bound on P(S) - e^eps times the upper bound on Q(S), each at "
        "97.5 %, so a one-sided 95 % lower bound on the true delta at eps. Exit 1 if it "
        "exceeds the valid guarantee delta_upper.",
        examples=[
            "shuffledp audit --n 100 --k 10 --eps0 2 --eps 0.5",
            "shuffledp audit --n 50 --k 3 --eps0 1 --eps 0.2 --dataset single-bin --nx0 20",
            "shuffledp audit --n 100 --k 10 --eps0 2 --eps 0.5 --trials 20000 --seed 1 --json",
        ],
    )
    p.add_argument("--n", type=integer(2), required=True, metavar="N", help="number of users")
    p.add_argument("--k", type=integer(2), required=True, metavar="K", help="number of values")
    p.add_argument(
        "--eps0", type=positive, required=True, metavar="EPS0", help="local k-RR epsilon"
    )
    p.add_argument(
        "--eps", type=non_negative, required=True, metavar="EPS", help="audit delta at this eps"
    )
    p.add_argument(
        "--dataset",
        choices=["worst", "single-bin"],
        default="worst",
        help="worst: of 'every other user holds x0' and 'every other user holds x2' (k >= 3), "
        "the one with the larger exact delta; single-bin: the seed paper's setting, --nx0 M "
        "others hold x0, the rest x2 (x1 if k = 2)",
    )
    p.add_argument(
        "--nx0",
        type=integer(0),
        metavar="COUNT",
        help="others holding x0 (with --dataset single-bin)",
    )
    p.add_argument(
        "--trials",
        type=integer(20),
        default=DEFAULT_TRIALS,
        metavar="COUNT",
        help="trials per dataset, half to choose the region, half held out (default: "
        f"{DEFAULT_TRIALS:,}; about 4 s at n=100, k=10 on 2 cores)",
    )
    p.add_argument(
        "--seed",
        type=integer(0),
        metavar="SEED",
        help="reproducible run (numpy PCG64); default: the OS CSPRNG",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    progress: Callable[[int], Callable[[], None]] | None = None
    if not (args.quiet or args.json):
        progress = _progress_factory()
    result = _run_with_progress(args, progress)
    if args.json:
        print(json.dumps(result.as_json()))
    else:
        print(format_result(result))
    if not result.below_valid_guarantee:
        print(
            f"shuffledp audit: delta_lower_ci {result.delta_lower_ci:.6g} exceeds the valid "
            f"guarantee delta_upper {result.delta_upper:.6g} (a 5 % event, or a guarantee that "
            "does not hold)",
            file=sys.stderr,
        )
        return 1
    return 0


def _progress_factory() -> Callable[[int], Callable[[], None]]:
    """A rich progress bar on stderr (hidden when stderr is not a terminal)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    console = Console(stderr=True)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        disable=not console.is_terminal,
        transient=True,
    )

    def factory(total: int) -> Callable[[], None]:
        progress.start()
        task = progress.add_task("audit: sampling histograms", total=total)
        done = [0]

        def advance() -> None:
            progress.advance(task)
            done[0] += 1
            if done[0] >= total:
                progress.stop()

        return advance

    return factory


def _run_with_progress(
    args: argparse.Namespace, progress: Callable[[int], Callable[[], None]] | None
) -> AuditResult:
    from shuffledp.simulations.audit.empirical import run_audit

    return run_audit(
        n=args.n,
        k=args.k,
        eps0=args.eps0,
        eps=args.eps,
        dataset=args.dataset,
        nx0=args.nx0,
        trials=args.trials,
        seed=args.seed,
        progress=progress,
    )


def format_result(result: AuditResult) -> str:
    """The human-readable report."""
    r = result
    lines = [
        f"empirical privacy audit: shuffled k-RR n={r.n} k={r.k} eps0={format_value(r.eps0)} "
        f"at eps={format_value(r.eps)}",
        f"dataset: {r.dataset.name}: {r.dataset.description}",
    ]
    if r.worst_candidates is not None:
        lines.append(
            "  chosen as the larger exact delta of (h_x0, h_x1): "
            + ", ".join(f"{name} {format_value(v)}" for name, v in r.worst_candidates.items())
        )
    lines += _region_lines(r)
    lines.append(
        f"bounds at n={r.n} k={r.k} eps0={format_value(r.eps0)} eps={format_value(r.eps)}:"
    )
    lines += _bound_table_lines(r.bounds)
    lines += _check_lines(r)
    lines.append(f"time: {r.elapsed_s:.1f} s")
    return "\n".join(lines)


def _region_lines(r: AuditResult) -> list[str]:
    """The trials, the region chosen, its held-out counts and the bound they give."""
    lines = [
        f"trials: {r.trials:,} per dataset ({r.selection_trials:,} choose the region, "
        f"{r.held_out_trials:,} held out); randomness: {r.randomness}",
        f"region (chosen on the selection half): {r.region.describe()}",
        f"held-out counts in the region: P {r.p_in_region:,} / {r.held_out_trials:,}, "
        f"Q {r.q_in_region:,} / {r.held_out_trials:,}",
    ]
    num, den = ("P", "Q") if r.region.direction == "P||Q" else ("Q", "P")
    lines.append(
        f"  {num}(S) >= {format_value(r.numerator_lower)}, {den}(S) <= {format_value(r.denominator_upper)} "
        f"(Clopper-Pearson, one-sided {100 * (1 - r.alpha / 2):g} % each)"
    )
    lines.append(
        f"delta_lower_ci = {format_value(r.delta_lower_ci)}  (one-sided {100 * (1 - r.alpha):g} % lower "
        f"confidence bound on the true delta at eps = {format_value(r.eps)})"
    )
    if r.exact_region_delta is not None:
        lines.append(
            f"  exact for this pair: {num}(S) - e^eps {den}(S) = {format_value(r.exact_region_delta)}; "
            f"delta of (h_x0, h_x1) = {format_value(r.exact_statistic_delta)}"
        )
    return lines


def _bound_table_lines(bounds: list[dict[str, Any]]) -> list[str]:
    """Every bound's row, columns aligned (a refused bound: its reason)."""
    table = [["bound", "delta", "delta_lower", "delta_upper", "what it is"]]
    for row in bounds:
        if "error" in row:
            shown = f"{format_value(row['published'])} (published)" if "published" in row else "n/a"
            what = row.get("guarantee", "")
            reason = f"refused: {row['error']}"
            table.append([row["bound"], shown, "", "", f"{what}; {reason}" if what else reason])
        else:
            table.append(
                [
                    row["bound"],
                    format_value(row["delta"]),
                    format_value(row.get("delta_lower", "")),
                    format_value(row.get("delta_upper", "")),
                    row["guarantee"],
                ]
            )
    widths = [max(len(t[i]) for t in table) for i in range(4)]
    return ["  " + "  ".join(t[i].ljust(widths[i]) for i in range(4)) + "  " + t[4] for t in table]


def _check_lines(r: AuditResult) -> list[str]:
    """The audit's checks: below the valid guarantee, and whether a published value is refuted."""
    verdict = "yes" if r.below_valid_guarantee else "NO"
    lines = [
        f"check: delta_lower_ci <= valid guarantee delta_upper {format_value(r.delta_upper)}: {verdict}"
    ]
    if r.published is not None:
        refuted = r.refutes_published
        lines.append(
            f"check: delta_lower_ci > published printed Theorem IV.1 value "
            f"{format_value(r.published['value'])} (not a valid guarantee): "
            + (
                "yes, refuted by experiment at 95 % confidence"
                if refuted
                else "no, not refuted by this run"
            )
        )
    return lines
