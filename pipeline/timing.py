"""Per-stage wall and CPU accounting for tasks (the numbers scripts/bench.py
reports).  CPU is the process's CPU time, which includes a Numba kernel's
worker threads; a Dask worker runs one task at a time, so a task's delta is its own."""
from __future__ import annotations

import time


class StageTimer:
    def __init__(self):
        self.stats: dict = {}
        self._t = (time.perf_counter(), time.process_time())

    def lap(self, name: str) -> None:
        now = (time.perf_counter(), time.process_time())
        wall, cpu = now[0] - self._t[0], now[1] - self._t[1]
        old = self.stats.get(name, (0.0, 0.0))
        self.stats[name] = (old[0] + wall, old[1] + cpu)
        self._t = now

    def count(self, name: str, n: float = 1.0) -> None:
        old = self.stats.get(name, (0.0, 0.0))
        self.stats[name] = (old[0] + n, old[1])


def merge(total: dict, part: dict) -> dict:
    for k, v in (part or {}).items():
        v = v if isinstance(v, (tuple, list)) else (float(v), 0.0)
        old = total.get(k, (0.0, 0.0))
        total[k] = (old[0] + v[0], old[1] + v[1])
    return total
