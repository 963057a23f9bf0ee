"""SIGTERM and SIGHUP stop a command exactly as a Ctrl-C (SIGINT) does.

A supervisor, ``timeout``, a CI runner or a closed terminal sends SIGTERM or SIGHUP, whose
default action kills the process on the spot: no ``finally`` runs, so the children a command
started (Mosquitto, the component processes, worker pools) were orphaned and the temporary key
folders (``/tmp/shuffledp-sim-*``) left on disk. Every command already stops everything it
started on a Ctrl-C (``KeyboardInterrupt``, or asyncio's cancellation of the main task), so
:func:`install` routes both signals into that one path: the handler calls whatever handles
SIGINT at that moment (Python's default handler, asyncio.Runner's, or raises
``KeyboardInterrupt`` where SIGINT is ignored, as in a backgrounded process), and remembers the
signal so that the command ends with the status a shell expects: 128 + the signal's number
(:func:`interrupted_status`: 130 SIGINT, 143 SIGTERM, 129 SIGHUP).
"""

from __future__ import annotations

import os
import signal
from types import FrameType

__all__ = ["EXIT_INTERRUPTED", "install", "interrupted_status", "received_signal"]

#: A Ctrl-C: 128 + SIGINT.
EXIT_INTERRUPTED = 128 + signal.SIGINT

_STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_state: dict[str, int | None] = {"pid": None, "received": None}


def install() -> None:
    """Handle SIGTERM and SIGHUP like SIGINT in this process (the command's main process)."""
    _state["pid"] = os.getpid()
    _state["received"] = None
    for sig in _STOPPING_SIGNALS:
        signal.signal(sig, _handle)


def received_signal() -> int | None:
    """The SIGTERM or SIGHUP that stopped this command, if one did."""
    return _state["received"]


def interrupted_status() -> int:
    """The exit status of an interrupted command: 128 + the signal that stopped it."""
    received = _state["received"]
    return EXIT_INTERRUPTED if received is None else 128 + received


def _handle(signum: int, frame: FrameType | None) -> None:
    if os.getpid() != _state["pid"]:
        # A process forked from the command inherited the handler: end as by default.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    first = _state["received"] is None
    if first:
        _state["received"] = signum
    on_sigint = signal.getsignal(signal.SIGINT)
    if callable(on_sigint):
        on_sigint(signal.SIGINT, frame)
    elif first:  # SIGINT ignored (a backgrounded process) or default: stop all the same
        raise KeyboardInterrupt
    # else: SIGINT is ignored because the command is already stopping its children; so is this.
