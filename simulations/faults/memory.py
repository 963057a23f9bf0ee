"""Peak resident memory of named processes while a scenario runs (Linux: ``/proc/PID/status``).

``with PeakRss({"mosquitto": lambda: broker.pid}) as peaks: ...`` samples every 0.1 s in a
thread; ``peaks.mib`` maps each name to the largest VmHWM (the kernel's own high-water mark, so
nothing between samples is missed) seen in MiB, over every process the getter returned (a
restarted process is followed too).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = ["PeakRss", "vm_hwm_mib"]

_HWM = re.compile(r"VmHWM:\s+(\d+) kB")


def vm_hwm_mib(pid: int) -> float | None:
    """VmHWM of ``pid`` in MiB, or None if it is gone or unreadable."""
    try:
        found = _HWM.search(Path(f"/proc/{pid}/status").read_text())
    except OSError:
        return None
    return int(found.group(1)) / 1024 if found else None


class PeakRss:
    """Samples the VmHWM of each process ``pids[name]()`` returns (None: not running)."""

    def __init__(self, pids: Mapping[str, Callable[[], int | None]], interval: float = 0.1) -> None:
        self.pids = dict(pids)
        self.interval = interval
        self.mib: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-rss", daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def sample(self) -> None:
        for name, getter in self.pids.items():
            pid = getter()
            mib = None if pid is None else vm_hwm_mib(pid)
            if mib is not None:
                self.mib[name] = round(max(self.mib.get(name, 0.0), mib), 1)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)
