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
    assert stat.S_IMODE((tmp_path / "locks").stat().st_mode) == 0o700
    assert not second.acquire()
    assert other.acquire()  # another identity: its own lock
    first.release()
    assert not first.path.exists()  # a stage that ends leaves no file behind
    assert second.acquire()
    second.release()
    other.release()
    assert not (tmp_path / "locks").exists()  # nor the folder, once empty
    assert "hop-0" not in first.path.name and len(first.path.name) == 32 + len(".lock")


def test_a_lock_file_unlinked_by_its_holder_is_not_trusted(tmp_path: Path) -> None:
    """A process that opened the file just before its holder removed it must not count the
    lock it then gets on the removed file: it locks the file now at the path instead."""
    first = InstanceLock("key", tmp_path / "locks")
    assert first.acquire()
    stale = first.path.with_suffix(".old")
    first.path.rename(stale)  # as if the holder had unlinked it after another opened it
    second = InstanceLock("key", tmp_path / "locks")
    assert second.acquire()  # a new file at the path, not the one first holds
    assert second.path.exists() and second.path.stat().st_ino != stale.stat().st_ino
    second.release()
    first.release()
