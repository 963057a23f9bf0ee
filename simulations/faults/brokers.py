"""The Mosquitto brokers of the fault bench: a plain one and the one `keys init` configures, on a
fixed loopback port so that a scenario can stop and start it again.

- :func:`plain_config`: ``listener PORT 127.0.0.1`` and ``allow_anonymous true``, nothing else
  (Mosquitto's own defaults for queues, in-flight messages and packet sizes).
- :func:`keys_init_config`: the ``access/mosquitto.conf`` that ``shuffledp keys init`` wrote into
  a key directory, its listener moved to the port given (whatever else it says is kept, so the
  bench measures the configuration a deployment gets).
- :class:`MosquittoProcess`: ``mosquitto -c CONF`` in its own process group, started, stopped
  (SIGTERM, then SIGKILL) and started again on the same port.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from shuffledp.brokers.mosquitto import find_mosquitto
from shuffledp.brokers.ports import LOOPBACK, accepts_connections
from shuffledp.errors import BrokerError

__all__ = ["MosquittoProcess", "keys_init_config", "plain_config"]

START_SECONDS = 10.0
STOP_SECONDS = 5.0


def plain_config(port: int) -> str:
    """A plain Mosquitto: a loopback listener open to anyone, nothing else."""
    return f"listener {port} {LOOPBACK}\nallow_anonymous true\n"


def keys_init_config(keys: Path, port: int) -> str:
    """The configuration `keys init` wrote to ``keys/access/mosquitto.conf``, listening on
    ``port`` of the loopback interface instead of its own. Run as root, Mosquitto would switch
    to the user ``mosquitto``, who cannot read the key directory's 0600 files: stay root then."""
    text = (keys / "access" / "mosquitto.conf").read_text(encoding="utf-8")
    text, count = re.subn(r"(?m)^listener\s+\d+.*$", f"listener {port} {LOOPBACK}", text)
    if count != 1:
        raise BrokerError(f"{keys}/access/mosquitto.conf: expected one listener line, got {count}")
    if hasattr(os, "geteuid") and os.geteuid() == 0 and not re.search(r"(?m)^user\s", text):
        text += "user root\n"
    return text


class MosquittoProcess:
    """``mosquitto -c DIRECTORY/mosquitto.conf`` (``config``) listening on ``port``; started
    with :meth:`start`, stopped with :meth:`stop`, both as often as a scenario needs. Its working
    directory is ``directory`` (where a configuration with ``persistence true`` and no location
    writes)."""

    def __init__(self, directory: Path, config: str, port: int) -> None:
        self.directory = directory
        self.port = port
        self.url = f"mqtt://{LOOPBACK}:{port}"
        self.config_path = directory / "mosquitto.conf"
        self.config_path.write_text(config, encoding="utf-8")
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def log(self) -> str:
        path = self.directory / "mosquitto.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self) -> None:
        """Start it and return once its port accepts connections; BrokerError (with its log)
        if it exits or does not listen within START_SECONDS."""
        binary = find_mosquitto()
        if binary is None:
            raise BrokerError("mosquitto not found (apt-get install mosquitto)")
        with open(self.directory / "mosquitto.log", "ab") as log:
            self.process = subprocess.Popen(
                [binary, "-c", str(self.config_path)],
                cwd=self.directory,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if accepts_connections(LOOPBACK, self.port):
                return
            time.sleep(0.02)
        self.stop()
        raise BrokerError(f"mosquitto did not start on port {self.port}:\n{self.log()[-2000:]}")

    def kill(self) -> None:
        """SIGKILL to its process group (no graceful save: sessions, queues and retained
        messages since the last autosave are gone); nothing if not running."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def stop(self) -> None:
        """SIGTERM to its process group, SIGKILL after STOP_SECONDS; nothing if not running."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(timeout=STOP_SECONDS)
                return
            except subprocess.TimeoutExpired:
                continue
