"""How a component's process ends: its exit status and the one line on stderr
(shuffledp/cli/components.py's docstring lists the exit codes).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import TYPE_CHECKING, Any

from shuffledp.protocol.delivery import EXIT_LOST, ReportsLostError
from shuffledp.protocol.runtime import NotReadyError

if TYPE_CHECKING:
    from shuffledp.shuffler.service import HopResult

__all__ = ["EXIT_NOT_READY", "EXIT_REFUSED", "hop_exit_status", "run_component", "setup_logging"]

EXIT_REFUSED = 3
EXIT_NOT_READY = 4


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )


def run_component(args: argparse.Namespace, main: Any) -> int:
    """Run the component's coroutine ``main`` with logging set up; its exit status, or the one
    line and status of an interruption, a stage not ready, or reports lost."""
    setup_logging(args.verbose)
    try:
        code: int = asyncio.run(main)
    except KeyboardInterrupt:
        print(f"shuffledp {args.command}: interrupted", file=sys.stderr)
        return 130
    except NotReadyError as exc:
        print(f"shuffledp {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_NOT_READY
    except ReportsLostError as exc:
        print(f"shuffledp {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_LOST
    # MqttConnectionError (an unreachable broker, a refused login) and every other
    # ShuffledpError reach main(): one line, exit status 1 (2 for bad input, 6 for the
    # analyzer's ReportExistsError).
    return code


def hop_exit_status(result: HopResult) -> int:
    """EXIT_LOST, EXIT_REFUSED or 0, with the line that says why on stderr."""
    if result.refused_for_loss:
        print(f"shuffledp hop: error: {result.refused}", file=sys.stderr)
        return EXIT_LOST
    if result.refused:
        print(f"shuffledp hop: round refused: {result.refused}", file=sys.stderr)
        return EXIT_REFUSED
    if result.lost:
        print(f"shuffledp hop: warning: {result.log['loss']} (--accept-loss)", file=sys.stderr)
    return 0
