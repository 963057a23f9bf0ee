import signal
import sys
from types import FrameType

# Until the command installs its own handlers (shuffledp.cli.signals.install, in main), a
# Ctrl-C, SIGTERM or SIGHUP that arrives while the modules load (a second or more under load)
# would print an import traceback or kill the process with no word: nothing has started yet,
# so end in one line with the status a shell expects, 128 + the signal.
_received = [int(signal.SIGINT)]


def _stop_while_starting(signum: int, frame: FrameType | None) -> None:
    _received[0] = signum
    raise KeyboardInterrupt


for _sig in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(_sig, _stop_while_starting)
try:
    from shuffledp.cli.main import forget_caught_interrupt, main
except KeyboardInterrupt:
    _command = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else ""
    _name = f"shuffledp {_command}".rstrip()
    sys.stderr.write(f"{_name}: interrupted while starting; nothing was started\n")
    # As forget_caught_interrupt (cli/main.py): clear CPython's record of a KeyboardInterrupt
    # ending string-exec'd code (dataclasses), which would replace our status with SIGINT.
    exec("")
    sys.exit(128 + _received[0])

status = main()
forget_caught_interrupt()
sys.exit(status)
