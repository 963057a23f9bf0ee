"""One process per stage identity on this machine: a lock file held while a stage is connected.

A second process started with the same arguments as a running hop or analyzer would connect
under the same client id and take the running one's connection (and persistent session) over:
the broker closes the older connection, the older process reconnects and takes it back, and so
on. On one machine that is caught before any connection: an exclusive
:class:`~shuffledp.protocol.mqtt.MqttTransport` first takes an exclusive ``flock`` on a file
named after the broker URL and its client id (a SHA-256, so no identity or secret shows in the
name), in ``<tmpdir>/shuffledp-locks-<uid>/`` (mode 0700), and keeps it until it disconnects. A
second process fails at once with one line; the running one is not touched. The kernel drops
the lock when the process dies, so a killed stage restarted at once finds it free. Across
machines, the transport's takeover rule applies instead (protocol/mqtt.py).

Why flock: it is what the journal already uses (protocol/journal.py), tied to the open file and
released by the kernel with the process; no lock library is needed for one call.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["InstanceLock", "lock_directory"]

logger = logging.getLogger("shuffledp.protocol")


def lock_directory() -> Path:
    """``<tmpdir>/shuffledp-locks-<uid>``: where the lock files are (created 0700 on use)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"shuffledp-locks-{uid}"


class InstanceLock:
    """An exclusive lock on ``key`` (e.g. broker URL and client id) for this process:
    :meth:`acquire` returns False if another process holds it, True once held (or if no lock
    can be made here: a directory that is not ours, a file system without flock; logged, the
    transport's takeover rule still applies); :meth:`release` lets it go."""

    def __init__(self, key: str, directory: Path | None = None) -> None:
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        self.path = (lock_directory() if directory is None else directory) / f"{digest}.lock"
        self._fd: int | None = None

    def acquire(self) -> bool:
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = self.path.parent.stat()
            if hasattr(os, "getuid") and (info.st_uid != os.getuid() or info.st_mode & 0o022):
                logger.warning("%s is not this user's own directory: no lock", self.path.parent)
                return True
            fd = os.open(
                self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, stat.S_IRUSR | stat.S_IWUSR
            )
        except OSError as exc:
            logger.warning("no instance lock at %s: %s", self.path, exc)
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except OSError as exc:
            os.close(fd)
            logger.warning("no instance lock at %s: %s", self.path, exc)
            return True
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
