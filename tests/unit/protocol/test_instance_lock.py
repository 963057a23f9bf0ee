"""One process per stage identity on a machine (protocol/instance_lock.py): the lock on a key
is refused while held (flock is per open file, so two holders in one test process conflict as
two processes would), free again once released, and independent between keys."""

from __future__ import annotations

import stat
from pathlib import Path

from shuffledp.protocol.instance_lock import InstanceLock


def test_a_held_lock_is_refused_until_released(tmp_path: Path) -> None:
    first = InstanceLock("mqtt://127.0.0.1:1883\0sdp-hop-0-x", tmp_path / "locks")
    second = InstanceLock("mqtt://127.0.0.1:1883\0sdp-hop-0-x", tmp_path / "locks")
    other = InstanceLock("mqtt://127.0.0.1:1883\0sdp-hop-1-x", tmp_path / "locks")
    assert first.acquire()
    assert not second.acquire()
    assert other.acquire()  # another identity: its own lock
    first.release()
    assert second.acquire()
    second.release()
    other.release()
    assert stat.S_IMODE((tmp_path / "locks").stat().st_mode) == 0o700
    assert "hop-0" not in first.path.name and len(first.path.name) == 32 + len(".lock")
