"""`shuffledp account`: (eps, delta) of shuffled k-RR from the command line."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from shuffledp.accountant.blanket import OptimalBlanket
from shuffledp.accountant.bounds import (
    Bound,
    BoundKind,
    CloneFormBound,
    OutsideConditionsError,
    SingleBin,
)
from shuffledp.accountant.inversion import eps_for_delta
from shuffledp.accountant.mechanism import N_MAX, ShuffledKRR
from shuffledp.accountant.registry import BOUND_NAMES, make_bound, needs_nx0
from shuffledp.accountant.renyi_girgis import RenyiGirgis, compose_rdp
from shuffledp.accountant.tight import Tight, witness_dataset
from shuffledp.cli.argtypes import integer, non_negative, positive, probability
from shuffledp.cli.help import add_command
from shuffledp.errors import InvalidParameterError


def add_parser(subparsers: Any) -> None:
    p = add_command(
        subparsers,
        "account",
        help="privacy guarantee (eps, delta) of shuffled k-RR",
        description="delta at eps, or eps at delta, for n users applying k-RR(eps0) and a "
        "shuffle. The default bound, tight, reports the valid guarantee delta_upper and a lower "
        "bound delta_lower on the true worst case.",
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
        help=f"one of {', '.join(BOUND_NAMES)}, or all",
    )
    p.add_argument(
        "--nx0",
        type=integer(0),
        metavar="COUNT",
        help="others holding x0 (single-bin, biswas-literal)",
    )
    p.add_argument(
        "--rounds", type=integer(1), default=1, metavar="COUNT", help="compose over COUNT rounds"
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
    if args.bound == "all":
        rows = [
            _row_or_error(make_bound(name, args.nx0), mech, args)
            if not needs_nx0(name) or args.nx0 is not None
            else {"bound": name, "error": "needs --nx0 M (others holding x0)"}
            for name in BOUND_NAMES
        ]
        if args.json:
            print(json.dumps({"n": mech.n, "k": mech.k, "eps0": mech.eps0, "bounds": rows}))
        else:
            _print_table(mech, rows, args)
        return 0
    bound = make_bound(args.bound, args.nx0)
    row = _compose_row(bound, mech, args) if args.rounds != 1 else _row(bound, mech, args)
    if args.json:
        print(json.dumps(row))
    else:
        _print_table(mech, [row], args)
    return 0


def _row(bound: Bound, mech: ShuffledKRR, args: argparse.Namespace) -> dict[str, Any]:
    kind = bound.kind_for(mech)  # wang-krr: not a guarantee for k = 2
    row: dict[str, Any] = {
        "bound": bound.name,
        "kind": str(kind),
        "guarantee": bound.guarantee_for(mech),
        "n": mech.n,
        "k": mech.k,
        "eps0": mech.eps0,
    }
    if (args.nx0 is not None and isinstance(bound, SingleBin)) or bound.name == "biswas-literal":
        row["nx0"] = args.nx0
    if args.eps is not None:
        result = bound.delta(mech, args.eps)
        row.update(eps=result.eps, delta=result.delta)
        if kind is not BoundKind.NOT_A_GUARANTEE:
            row.update(delta_lower=result.delta_lower, delta_upper=result.delta_upper)
        row.update({k: v for k, v in result.extra.items() if k != "nx0"})
    else:
        eps_result = eps_for_delta(bound, mech, args.delta)
        row.update(delta=eps_result.delta, eps=eps_result.eps)
        if kind is not BoundKind.NOT_A_GUARANTEE:
            row.update(eps_lower=eps_result.eps_lower, eps_upper=eps_result.eps_upper)
        row.update(eps_result.extra)
    if isinstance(bound, Tight):
        row["lower_dataset"] = witness_dataset(str(row.get("lower_from", "")))
    return row


def _row_or_error(bound: Bound, mech: ShuffledKRR, args: argparse.Namespace) -> dict[str, Any]:
    try:
        return _row(bound, mech, args)
    except OutsideConditionsError as exc:
        return {
            "bound": bound.name,
            "kind": str(bound.kind_for(mech)),
            "guarantee": bound.guarantee_for(mech),
            "error": str(exc),
        }


def _compose_row(bound: Bound, mech: ShuffledKRR, args: argparse.Namespace) -> dict[str, Any]:
    from shuffledp.accountant.composition import (  # lazy: dp_accounting takes ~0.9 s to import
        PairSource,
        compose,
    )

    if isinstance(bound, RenyiGirgis):
        return _rdp_compose_row(bound, mech, args)
    members: list[PairSource] | None
    if isinstance(bound, Tight):
        members = None
    elif isinstance(bound, CloneFormBound | OptimalBlanket):
        members = [bound]
    else:
        raise InvalidParameterError(
            f"--rounds needs a bound with a dominating pair (tight, optimal-blanket, "
            f"strong-adversary, clones, krr-clones) or an RDP bound (renyi-girgis); {bound.name} "
            f"is {bound.kind}"
        )
    result = compose(mech, args.rounds, eps=args.eps, delta=args.delta, bounds=members)
    row: dict[str, Any] = {
        "bound": bound.name,
        "kind": str(BoundKind.UPPER),
        "guarantee": f"valid upper bound after {args.rounds} rounds (PLD composition, pessimistic)",
        "n": mech.n,
        "k": mech.k,
        "eps0": mech.eps0,
        "rounds": args.rounds,
        "pair": result.pair,
        "eps": result.eps,
        "delta": result.delta,
    }
    return row


def _rdp_compose_row(
    bound: RenyiGirgis, mech: ShuffledKRR, args: argparse.Namespace
) -> dict[str, Any]:
    """renyi-girgis over rounds: composed in RDP (rounds x eps(lambda) per order), converted once."""
    result = compose_rdp(mech, args.rounds, eps=args.eps, delta=args.delta)
    return {
        "bound": bound.name,
        "kind": str(BoundKind.UPPER),
        "guarantee": f"valid upper bound after {args.rounds} rounds (composed in RDP: "
        f"{args.rounds} x eps(lambda) per order, then converted)",
        "n": mech.n,
        "k": mech.k,
        "eps0": mech.eps0,
        "rounds": args.rounds,
        "composition": "rdp",
        "order": result.order,
        "eps": result.eps,
        "delta": result.delta,
    }


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


def _print_table(mech: ShuffledKRR, rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"shuffled k-RR: n={mech.n} k={mech.k} eps0={format_value(mech.eps0)}"
        + (f" rounds={args.rounds}" if args.rounds != 1 else "")
    )
    if args.eps is not None:
        headers = ["bound", "eps", "delta", "delta_lower", "delta_upper", "what it is"]
        keys = ["bound", "eps", "delta", "delta_lower", "delta_upper", "guarantee"]
    else:
        headers = ["bound", "delta", "eps", "eps_lower", "eps_upper", "what it is"]
        keys = ["bound", "delta", "eps", "eps_lower", "eps_upper", "guarantee"]
    table = [headers]
    for row in rows:
        if "error" in row:
            table.append([row["bound"], "n/a", "", "", "", f"refused: {row['error']}"])
            continue
        table.append([format_value(row.get(key, "")) for key in keys])
    widths = [max(len(r[i]) for r in table) for i in range(len(headers) - 1)]
    for r in table:
        cells = [r[i].ljust(widths[i]) for i in range(len(widths))]
        print("  ".join(cells) + "  " + r[-1])
    for row in rows:
        if "delta_x0_over_x1" in row:
            print(
                f"single-bin directions: delta(x0||x1)={format_value(row['delta_x0_over_x1'])} "
                f"delta(x1||x0)={format_value(row['delta_x1_over_x0'])}"
            )
        if "pair" in row and "rounds" in row:
            print(f"composed over {row['rounds']} rounds with the {row['pair']} pair")
        if "upper_skipped" in row:
            print(f"skipped: {row['upper_skipped']}")
        if "upper_from" in row:
            print(f"tight: upper from {row['upper_from']}, lower from {row['lower_from']}")
