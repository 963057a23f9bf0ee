"""The ``shuffledp`` command's entry point, for both ``shuffledp ...`` (the console script) and
``python -m shuffledp ...``: it handles a signal that arrives while the CLI's modules load.

Until the command installs its own handlers (shuffledp.cli.signals.install, in main), a Ctrl-C,
SIGTERM or SIGHUP that arrives while the modules load (a second or more under load) would print
an import traceback or kill the process with no word: nothing has started yet, so it ends in one
line with the status a shell expects, 128 + the signal. This module imports nothing heavy at its
top, so that the window before the handlers is the interpreter's start alone.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import NoReturn

__all__ = ["run"]


class _StartupSignal(KeyboardInterrupt):
    """SIGTERM or SIGHUP during start-up, raised where the import was."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop_while_starting(signum: int, frame: FrameType | None) -> None:
    raise _StartupSignal(signum)


def run() -> NoReturn:
    """Load the CLI under the start-up handlers, then run the command and exit with its status."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _stop_while_starting)
    try:
        # Imported here, not at the top: the handlers above must be in place while it loads.
        from shuffledp.cli.main import forget_caught_interrupt, main
    except KeyboardInterrupt as interrupt:
        signum = interrupt.signum if isinstance(interrupt, _StartupSignal) else signal.SIGINT
        command = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else ""
        name = f"shuffledp {command}".rstrip()
        sys.stderr.write(f"{name}: interrupted while starting; nothing was started\n")
        # As forget_caught_interrupt (cli/main.py): clear CPython's record of a KeyboardInterrupt
        # ending string-exec'd code (dataclasses), which would replace our status with SIGINT.
        exec("")
        sys.exit(128 + int(signum))
    status = main()
    forget_caught_interrupt()
    sys.exit(status)
