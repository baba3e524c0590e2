"""Per-stage wall and CPU accounting for tasks (the numbers scripts/bench.py
reports).  CPU is the process's CPU time, which includes a Numba kernel's
worker threads; a Dask worker runs one task at a time, so a task's delta is its own."""
from __future__ import annotations

import time
from typing import Any


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


# --------------------------------------------------------------------------- progress


class Progress:
    """Per-stage progress of one build on stderr, and the per-stage figures of
    its build record.

    On a terminal each stage is one live line (tasks done / submitted, MB
    written to the world folder, the write rate, seconds); otherwise plain lines
    at each stage's start and end, and every ``heartbeat`` seconds in between,
    so a log shows a long stage is alive.  ``stages`` (wall seconds per stage) is
    what scripts/bench.py reads; ``records`` adds client CPU, bytes and tasks.
    ``size_fn`` returns the bytes under the world folder (None: not measured).
    """

    def __init__(self, world_id: str, enabled: bool = True, size_fn=None, live: bool | None = None,
                 stream=None, interval: float = 0.5, heartbeat: float = 30.0):
        import sys
        import threading

        self.world_id = world_id
        self.enabled = enabled
        self.stream = stream or sys.stderr
        is_tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.live = enabled and (is_tty if live is None else (live and is_tty))
        self.size_fn = size_fn
        self.stages: dict = {}
        self.records: dict = {}
        self.interval, self.heartbeat = interval, heartbeat
        self._lock = threading.Lock()
        self._futures: list = []
        self._name = None
        self._t = self._cpu = 0.0
        self._bytes0 = 0
        self._last_size = (0.0, 0)
        self._stop = threading.Event()
        self._thread = None

    # -- stage boundaries -----------------------------------------------------------
    def start(self, name: str) -> None:
        self.stop()
        with self._lock:
            self._futures = []
        self._name = name
        self._t, self._cpu = time.perf_counter(), time.process_time()
        self._bytes0 = self._size()
        self._last_size = (self._t, self._bytes0)
        if self.enabled and not self.live:
            self._print(f"[{self.world_id}] {name} ...")
        if self.enabled:
            self._stop.clear()
            import threading

            self._thread = threading.Thread(target=self._tick, name=f"progress-{self.world_id}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        if self._name is None:
            return
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        wall = time.perf_counter() - self._t
        cpu = time.process_time() - self._cpu
        written = self._size() - self._bytes0
        done, total = self._counts()
        self.stages[self._name] = self.stages.get(self._name, 0.0) + wall
        rec = self.records.setdefault(self._name, {"wall_s": 0.0, "cpu_s": 0.0, "bytes": 0, "tasks": 0})
        rec["wall_s"] += wall
        rec["cpu_s"] += cpu
        rec["bytes"] += written
        rec["tasks"] += total
        if self.enabled:
            line = f"[{self.world_id}] {self._name} done in {wall:.1f}s" + self._detail(done, total, written, wall)
            self._print(line, final=True)
        self._name = None

    def note(self, text: str) -> None:
        """One line about the build (``[world] text``) between the stage lines; on a terminal
        it is printed above the stage's live line, which the next tick redraws."""
        if self.enabled:
            self._print(f"[{self.world_id}] {text}", final=True)

    def track(self, future: Any) -> None:
        """Count a submitted task in the current stage."""
        with self._lock:
            self._futures.append(future)

    # -- internals ------------------------------------------------------------------
    def _counts(self) -> tuple:
        with self._lock:
            futures = list(self._futures)
        return sum(1 for f in futures if f.done()), len(futures)

    def _size(self) -> int:
        if self.size_fn is None:
            return 0
        try:
            return int(self.size_fn())
        except OSError:  # a file renamed or removed while it was being measured
            return self._last_size[1]

    @staticmethod
    def _detail(done: int, total: int, written: int, seconds: float) -> str:
        parts = []
        if total:
            parts.append(f"{done}/{total} tasks")
        if written >= 1e6:
            parts.append(f"{written / 1e6:,.1f} MB written ({written / 1e6 / max(seconds, 1e-9):,.1f} MB/s)")
        elif written >= 1e3:
            parts.append(f"{written / 1e3:,.0f} kB written")
        elif written > 0:
            parts.append(f"{written} B written")
        return (": " + ", ".join(parts)) if parts else ""

    def _tick(self) -> None:
        last_beat = time.perf_counter()
        size_every = 2.0 if self.live else self.heartbeat
        size, size_t = self._bytes0, self._t
        while not self._stop.wait(self.interval if self.live else min(self.heartbeat, 5.0)):
            now = time.perf_counter()
            if now - size_t >= size_every:
                size, size_t = self._size(), now
            done, total = self._counts()
            elapsed = now - self._t
            if self.live:
                self._print(f"[{self.world_id}] {self._name} {elapsed:.0f}s" + self._detail(done, total, size - self._bytes0, elapsed))
            elif now - last_beat >= self.heartbeat:
                last_beat = now
                self._print(f"[{self.world_id}] {self._name} running {elapsed:.0f}s" + self._detail(done, total, size - self._bytes0, elapsed))

    def _print(self, line: str, final: bool = False) -> None:
        if self.live:
            # one line per stage, rewritten in place (\r, then clear to the end of the line)
            self.stream.write("\r" + line + "\x1b[K" + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
