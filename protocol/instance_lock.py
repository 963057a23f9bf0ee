"""One process per stage identity on this machine: a lock file held while a stage is connected.

A second process started with the same arguments as a running hop or analyzer would connect
under the same client id and take the running one's connection (and persistent session) over:
the broker closes the older connection, the older process reconnects and takes it back, and so
on. On one machine that is caught before any connection: an exclusive
:class:`~shuffledp.protocol.mqtt.MqttTransport` first takes an exclusive ``flock`` on a file
named after the broker URL and its client id (a SHA-256, so no identity or secret shows in the
name), in ``<tmpdir>/shuffledp-locks-<uid>/`` (mode 0700), and keeps it until it disconnects. A
second process fails at once with one line; the running one is not touched. The kernel drops
the lock when the process dies, so a killed stage restarted at once finds it free; a stage that
ends removes its file (and the folder once empty), so nothing is left behind. Across
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
        # The file is removed on release (a stage leaves nothing behind), so a file found may
        # be one that its holder unlinked just after we opened it: the lock counts only if the
        # path still names the file we locked (else open the new one and try again).
        for _ in range(5):
            fd = self._open()
            if fd is None:
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
            if self._still_named(fd):
                self._fd = fd
                return True
            os.close(fd)
        logger.warning("no instance lock at %s: its file kept being replaced", self.path)
        return True

    def _open(self) -> int | None:
        """A descriptor of the lock file (created if missing), or None if no lock can be made
        here (logged)."""
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = self.path.parent.stat()
            if hasattr(os, "getuid") and (info.st_uid != os.getuid() or info.st_mode & 0o022):
                logger.warning("%s is not this user's own directory: no lock", self.path.parent)
                return None
            return os.open(
                self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, stat.S_IRUSR | stat.S_IWUSR
            )
        except OSError as exc:
            logger.warning("no instance lock at %s: %s", self.path, exc)
            return None

    def _still_named(self, fd: int) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except OSError:
            return False

    def release(self) -> None:
        """Remove the lock file (while still holding it, so no one can have locked it), then
        drop the lock, and the directory if it is left empty."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            with contextlib.suppress(OSError):
                os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
            with contextlib.suppress(OSError):
                self.path.parent.rmdir()  # only if empty: other stages' locks stay
