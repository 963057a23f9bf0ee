"""`shuffledp account`: (eps, delta) of shuffled k-RR from the command line."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from shuffledp.accountant.bounds.base import (
    Bound,
    BoundKind,
    OutsideConditionsError,
)
from shuffledp.accountant.bounds.renyi_girgis import compose_rdp
from shuffledp.accountant.mechanism import N_MAX, ShuffledKRR
from shuffledp.accountant.records import (
    AccountAnswer,
    BoundResult,
    MechanismRecord,
    Query,
    WitnessDataset,
)
from shuffledp.accountant.registry import BOUND_NAMES, make_bound, needs_nx0
from shuffledp.accountant.tight import witness_dataset
from shuffledp.cli.argtypes import integer, non_negative, positive, probability
from shuffledp.cli.help import add_command
from shuffledp.errors import InvalidParameterError

if TYPE_CHECKING:
    from rich.progress import TaskID

#: One line per --bound name for --help (docs/accounting.md's table, shortened; a test keeps
#: the keys equal to the registry's BOUND_NAMES).
BOUND_MEANINGS = {
    "tight": "the valid guarantee (min of the upper bounds) and a lower bound on the truth",
    "optimal-blanket": "upper, every dataset; the usual winner",
    "largest-group": "upper, every dataset; never above optimal-blanket",
    "strong-adversary": "upper, every dataset (Balle et al. 2019)",
    "clones": "upper, every dataset, any eps0-LDP randomizer (Feldman et al. 2021)",
    "krr-clones": "upper, every dataset; the clone reduction for k-RR",
    "family-f": "lower: the exact delta of the worst dataset family tried",
    "wang-krr": "lower for k >= 3 (published as upper, fails); upper for k = 2",
    "all-others-x0": "lower: the exact delta when every other user holds x0",
    "erlingsson": "upper, analytic; eps0 <= 0.5, n >= 1000 only",
    "blanket-analytic": "upper, analytic (Balle et al. 2019 Thm 3.1); a narrow eps range only",
    "renyi-girgis": "upper via Renyi DP (Girgis et al. 2021); composes over --rounds",
    "single-bin": "one dataset (--nx0 others hold x0); informative, not a guarantee",
    "biswas-literal": "the seed paper's printed formula; not a valid guarantee (--nx0)",
}

#: --rounds' limit: composing 1e5 rounds took 30 s (1e3: 6 s) on one core of the 2-core CI
#: machine; 1e6 ran for minutes with no output.
MAX_ROUNDS = 100_000
#: From this many rounds the command says on stderr that it composes (several seconds).
SLOW_ROUNDS = 1_000


def add_parser(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "account",
        help="privacy guarantee (eps, delta) of shuffled k-RR",
        description="delta at eps, or eps at delta, for n users applying k-RR(eps0) and a "
        "shuffle. The default bound, tight, reports the valid guarantee delta_upper and a lower "
        "bound delta_lower on the true worst case.\n\nbounds (--bound; sources in "
        "docs/accounting.md):\n"
        + "\n".join(f"  {name:<17} {meaning}" for name, meaning in BOUND_MEANINGS.items()),
        examples=[
            "shuffledp account --n 10000 --k 15 --eps0 4 --delta 1e-6",
            "shuffledp account --n 1e6 --k 100 --eps0 2 --eps 0.5 --bound all",
            "shuffledp account --n 1000 --k 10 --eps0 1 --delta 1e-6 --rounds 52 --json",
        ],
    )
    p.add_argument(
        "--n",
        type=user_count,
        required=True,
        metavar="N",
        help=f"number of users (2 .. {N_MAX:.0e}; 1e6 is ok)",
    )
    p.add_argument("--k", type=integer(2), required=True, metavar="K", help="number of values")
    p.add_argument(
        "--eps0", type=positive, required=True, metavar="EPS0", help="local k-RR epsilon"
    )
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--eps", type=non_negative, metavar="EPS", help="report delta at this eps")
    target.add_argument(
        "--delta", type=probability, metavar="DELTA", help="report eps at this delta"
    )
    p.add_argument(
        "--bound",
        default="tight",
        choices=[*BOUND_NAMES, "all"],
        metavar="NAME",
        help="a bound listed above, or all: every one side by side (default: tight)",
    )
    p.add_argument(
        "--nx0",
        type=integer(0),
        metavar="COUNT",
        help="others holding x0: only for single-bin and biswas-literal (or with --bound all), "
        "refused with any other bound",
    )
    p.add_argument(
        "--rounds",
        type=integer(1, MAX_ROUNDS),
        default=1,
        metavar="COUNT",
        help=f"compose over COUNT rounds (at most {MAX_ROUNDS:,}): a bracket on the composed "
        f"worst case; a line on stderr says when it starts from {SLOW_ROUNDS:,} rounds",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def user_count(text: str) -> int:
    """--n as an integer, also written like 1e6; refuses non-integers and values above N_MAX
    (argparse turns the error into one line naming --n)."""
    try:
        value = float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be an integer (e.g. 1000 or 1e6), got {text!r}"
        ) from None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise argparse.ArgumentTypeError(
            f"must be an integer (e.g. 1000 or 1e6), got {text!r}"
        ) from None
    count = int(value)
    if count < 2:
        raise argparse.ArgumentTypeError(f"must be >= 2, got {text}")
    if count > N_MAX:
        raise argparse.ArgumentTypeError(
            f"must be <= {N_MAX:_} (the range the exact bounds are built and tested for), "
            f"got {text}"
        )
    return count


def run(args: argparse.Namespace) -> int:
    mech = ShuffledKRR(n=args.n, k=args.k, eps0=args.eps0)
    if args.rounds != 1 and args.bound == "all":
        raise InvalidParameterError("--rounds goes with one bound, not --bound all")
    if args.nx0 is not None and args.bound != "all" and not needs_nx0(args.bound):
        nx0_bounds = ", ".join(name for name in BOUND_NAMES if needs_nx0(name))
        raise InvalidParameterError(
            f"--nx0 applies to the bounds of one dataset ({nx0_bounds}), not --bound "
            f"{args.bound}, which does not read it"
        )
    if args.rounds >= SLOW_ROUNDS:
        print(
            f"shuffledp account: composing over {args.rounds:,} rounds (up to about 30 s at "
            f"{MAX_ROUNDS:,})...",
            file=sys.stderr,
            flush=True,
        )
    if args.bound == "all":
        results = [
            _result_or_error(make_bound(name, args.nx0), mech, args)
            if not needs_nx0(name) or args.nx0 is not None
            else BoundResult(
                bound=name,
                kind=str(make_bound(name, 0).kind_for(mech)),
                guarantee=make_bound(name, 0).guarantee_for(mech),
                error="needs --nx0 M (others holding x0)",
            )
            for name in BOUND_NAMES
        ]
    else:
        bound = make_bound(args.bound, args.nx0)
        results = [
            _compose_result(bound, mech, args) if args.rounds != 1 else _result(bound, mech, args)
        ]
    answer = AccountAnswer(
        mechanism=MechanismRecord(n=mech.n, k=mech.k, eps0=mech.eps0),
        query=Query(
            eps=args.eps, delta=args.delta, bound=args.bound, rounds=args.rounds, nx0=args.nx0
        ),
        results=tuple(results),
    )
    if args.json:
        # Infinity where a bound certifies no finite eps (Python's json reads it back).
        print(json.dumps(answer.to_json()))
    else:
        _print_table(answer)
    return 0


def _result(bound: Bound, mech: ShuffledKRR, args: argparse.Namespace) -> BoundResult:
    kind = bound.kind_for(mech)  # wang-krr: not a guarantee for k = 2
    bracketed = kind is not BoundKind.NOT_A_GUARANTEE
    fields: dict[str, Any] = {
        "bound": bound.name,
        "kind": str(kind),
        "guarantee": bound.guarantee_for(mech),
    }
    fields.update(bound.parameters())
    if args.eps is not None:
        result = bound.delta(mech, args.eps)
        fields.update(eps=result.eps, delta=result.delta)
        if bracketed:
            fields.update(delta_lower=result.delta_lower, delta_upper=result.delta_upper)
        extra = result.extra
    else:
        eps_result = bound.eps_bracket(mech, args.delta)
        fields.update(delta=eps_result.delta, eps=eps_result.eps)
        if bracketed:
            fields.update(eps_lower=eps_result.eps_lower, eps_upper=eps_result.eps_upper)
        extra = eps_result.extra
    fields.update(_details(extra))
    if kind is BoundKind.BRACKET:  # tight: its lower end names a dataset
        fields["dataset"] = lower_dataset(str(fields.get("lower_from", "")))
    return BoundResult(**fields)


def lower_dataset(lower_from: str) -> WitnessDataset | None:
    """The dataset behind tight's lower end (its ``lower_from`` name), None for none."""
    witness = witness_dataset(lower_from)
    if not witness:
        return None
    family = str(witness["family"])
    sizes = [int(value) for key, value in witness.items() if key != "family"]
    rest = dict(zip(("x1", "x2"), sizes[1:], strict=True)) if family == "counts" else {}
    return WitnessDataset(family=family, size=sizes[0], **rest)


def _details(extra: Mapping[str, float | str]) -> dict[str, Any]:
    """A result's ``extra`` as BoundResult fields. The label (``guarantee``) and ``nx0`` are
    set from the bound itself; a key not listed here is a new extra to add to BoundResult (and
    to docs/report-schema.md), so it fails loudly rather than vanish."""
    out: dict[str, Any] = {}
    for key, value in extra.items():
        if key in ("upper_from", "lower_from", "upper_skipped"):
            out[key] = str(value)
        elif key in ("ratio", "delta_x0_over_x1", "delta_x1_over_x0"):
            out[key] = float(value)
        elif key == "order":
            out[key] = int(value)
        elif key == "a":
            out["dataset"] = WitnessDataset(family=str(extra["family"]), size=int(value))
        elif key not in ("guarantee", "nx0", "family"):
            raise AssertionError(f"a result extra without a BoundResult field: {key!r}")
    return out


def _result_or_error(bound: Bound, mech: ShuffledKRR, args: argparse.Namespace) -> BoundResult:
    """The bound's result, or its refusal (``Bound.refusal``, or the conditions it names when
    evaluated) in the error field."""
    error = bound.refusal(mech)
    if error is None:
        try:
            return _result(bound, mech, args)
        except OutsideConditionsError as exc:
            error = str(exc)
    return BoundResult(
        bound=bound.name,
        kind=str(bound.kind_for(mech)),
        guarantee=bound.guarantee_for(mech),
        error=error,
    )


def _compose_result(bound: Bound, mech: ShuffledKRR, args: argparse.Namespace) -> BoundResult:
    from shuffledp.accountant.composition.composition_bracket import (  # lazy: dp_accounting ~0.9 s import
        compose_bracket,
    )

    if bound.composition == "rdp":
        return _rdp_compose_result(bound, mech, args)
    kind = bound.kind_for(mech)
    if kind not in (BoundKind.BRACKET, BoundKind.UPPER):
        raise InvalidParameterError(
            f"--rounds needs a valid upper bound (its privacy profile gives the dominating pair: "
            f"tight, optimal-blanket, largest-group, strong-adversary, clones, krr-clones) or an "
            f"RDP bound (renyi-girgis); {bound.name} is of kind {kind}"
        )
    with delayed_progress(f"--rounds {args.rounds}: one-round profile") as progress:
        result = compose_bracket(
            mech,
            args.rounds,
            eps=args.eps,
            delta=args.delta,
            bound=None if kind is BoundKind.BRACKET else bound,
            progress=progress,
        )
    if args.eps is not None:
        ends = {"eps": args.eps, "delta": result.upper}
        ends.update(delta_lower=result.lower, delta_upper=result.upper)
    else:
        ends = {"delta": args.delta, "eps": result.upper}
        ends.update(eps_lower=result.lower, eps_upper=result.upper)
    return BoundResult(
        bound=bound.name,
        kind=str(BoundKind.BRACKET),
        guarantee=f"after {args.rounds} rounds (PLD composition): the upper end is a valid "
        "guarantee (dominating pair from the one-round profile, pessimistic); the lower end is "
        "the same dataset pair in every round (rounded down)",
        rounds=args.rounds,
        composition="pld",
        pair=f"{result.upper_from} profile",
        upper_from=result.upper_from,
        lower_from=result.lower_from,
        ratio=result.ratio,
        upper_skipped=result.notes,
        dataset=lower_dataset(result.lower_from),
        **ends,
    )


#: Seconds before --rounds shows a progress bar on stderr.
PROGRESS_AFTER = 2.0


@contextlib.contextmanager
def delayed_progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """Yields ``progress(done, total)``; a rich bar on stderr appears once PROGRESS_AFTER
    seconds have passed (never when stderr is not a terminal), and is removed at the end."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(stderr=True)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not console.is_terminal,
        transient=True,
    )
    started = time.monotonic()
    task: list[TaskID] = []

    def update(done: int, total: int) -> None:
        if not task:
            if time.monotonic() - started < PROGRESS_AFTER:
                return
            bar.start()
            task.append(bar.add_task(label, total=total))
        bar.update(task[0], completed=done, total=total)

    try:
        yield update
    finally:
        if task:
            bar.stop()


def _rdp_compose_result(bound: Bound, mech: ShuffledKRR, args: argparse.Namespace) -> BoundResult:
    """renyi-girgis over rounds: composed in RDP (rounds x eps(lambda) per order), converted once."""
    result = compose_rdp(mech, args.rounds, eps=args.eps, delta=args.delta)
    return BoundResult(
        bound=bound.name,
        kind=str(BoundKind.UPPER),
        guarantee=f"valid upper bound after {args.rounds} rounds (composed in RDP: "
        f"{args.rounds} x eps(lambda) per order, then converted)",
        rounds=args.rounds,
        composition="rdp",
        order=result.order,
        eps=result.eps,
        delta=result.delta,
    )


def format_value(value: Any) -> str:
    """A number as the command-line tables print it (6 significant digits, or 4 in scientific
    notation outside [1e-4, 1e4)); anything else with str()."""
    if isinstance(value, float):
        if value == 0.0:
            return "0"
        if math.isinf(value):
            return "inf"
        return f"{value:.6g}" if 1e-4 <= abs(value) < 1e4 else f"{value:.4e}"
    return str(value)


def _print_table(answer: AccountAnswer) -> None:
    mech, query = answer.mechanism, answer.query
    print(
        f"shuffled k-RR: n={mech.n} k={mech.k} eps0={format_value(mech.eps0)}"
        + (f" rounds={query.rounds}" if query.rounds != 1 else "")
    )
    if query.eps is not None:
        headers = ["bound", "eps", "delta", "delta_lower", "delta_upper", "what it is"]
        keys = ["bound", "eps", "delta", "delta_lower", "delta_upper", "guarantee"]
    else:
        headers = ["bound", "delta", "eps", "eps_lower", "eps_upper", "what it is"]
        keys = ["bound", "delta", "eps", "eps_lower", "eps_upper", "guarantee"]
    table = [headers]
    for result in answer.results:
        if result.error is not None:
            table.append([result.bound, "n/a", "", "", "", f"refused: {result.error}"])
            continue
        cells = [getattr(result, key) for key in keys]
        table.append(["" if cell is None else format_value(cell) for cell in cells])
    widths = [max(len(r[i]) for r in table) for i in range(len(headers) - 1)]
    for r in table:
        cells = [r[i].ljust(widths[i]) for i in range(len(widths))]
        print("  ".join(cells) + "  " + r[-1])
    for result in answer.results:
        _print_notes(result)


def _print_notes(result: BoundResult) -> None:
    if result.delta_x0_over_x1 is not None:
        print(
            f"single-bin directions: delta(x0||x1)={format_value(result.delta_x0_over_x1)} "
            f"delta(x1||x0)={format_value(result.delta_x1_over_x0)}"
        )
    if result.pair is not None:
        print(f"composed over {result.rounds} rounds with the {result.pair} pair")
        if result.lower_from is not None:
            print(
                f"composed: upper from {result.upper_from}, lower from {result.lower_from} "
                f"(same pair every round), ratio {format_value(result.ratio)}"
            )
            if result.upper_skipped is not None:
                print(f"note: {result.upper_skipped}")
            return
    if result.upper_skipped is not None:
        print(f"skipped: {result.upper_skipped}")
    if result.upper_from is not None:
        print(f"tight: upper from {result.upper_from}, lower from {result.lower_from}")
