"""A build's task graph as it ran, and what it would take on W workers.

:class:`Recorder` wraps the executor a build is given (``scripts/bench.py`` passes
one): every task runs inside :func:`_timed`, which notes where and when it ran
(wall start and end on the worker, its thread's CPU), and the client's side is a
sequence of events (each submit, each gather with the tasks it waited for).  That
is the whole dependency structure of a biobank build: a task depends on the
client work that submitted it, and the client, after a gather, on the tasks it
gathered (the build's steps pass no task's future to another task).

:func:`replay` puts the recorded graph through a list scheduler on ``W`` workers:
the client runs its recorded work between events in order; a submitted task is
ready at once and starts on the worker that frees first (tasks in submission
order, as the scheduler's FIFO priorities give them); a gather waits for its
tasks' finish and then for the overhead measured for it (results moved and
unpickled).  The predicted wall is when the client's last event ends.  Task
durations are those measured, so a prediction for more workers than the recording
had assumes a worker runs a task as fast as a worker did here.
"""
from __future__ import annotations

import heapq
import os
import threading
import time
from typing import Any, Callable


def _timed(fn: Callable, *args, **kwargs):
    t0, c0 = time.time(), time.thread_time()
    value = fn(*args, **kwargs)
    return value, (t0, time.time(), time.thread_time() - c0, os.getpid(), threading.get_ident())


class _Recorded:
    """A task's future: ``result()`` unwraps what :func:`_timed` returned."""

    def __init__(self, recorder: "Recorder", future: Any, index: int):
        self._recorder, self.future, self.index = recorder, future, index

    def done(self) -> bool:
        return self.future.done()

    def result(self):
        return self._recorder._unwrap(self, self.future.result())

    def add_done_callback(self, fn: Callable) -> None:
        self.future.add_done_callback(lambda _f: fn(self))

    def __getattr__(self, name):
        return getattr(self.future, name)


class Recorder:
    """The executor as a build sees it, recording every task and client event."""

    def __init__(self, executor: Any):
        self._executor = executor
        self.tasks: list = []  # {"name", "submitted", "start", "end", "cpu", "worker"}
        self.events: list = []  # ("submit", t, index) | ("gather", t_start, t_end, [index, ...])
        self.t0 = time.time()
        self._lock = threading.Lock()

    def submit(self, fn: Callable, *args, key: str | None = None, **kwargs):
        name = getattr(fn, "__name__", "task")
        future = self._executor.submit(_timed, fn, *args, key=key, **kwargs)
        with self._lock:
            index = len(self.tasks)
            now = time.time()
            self.tasks.append({"name": name, "key": key or name, "submitted": now})
            self.events.append(("submit", now, index))
        return _Recorded(self, future, index)

    def _unwrap(self, rec: _Recorded, packed):
        value, (start, end, cpu, pid, thread) = packed
        self.tasks[rec.index].update(start=start, end=end, cpu=cpu, worker=f"{pid}:{thread}")
        return value

    def gather(self, futures) -> list:
        futures = list(futures)
        t = time.time()
        raw = self._executor.gather([f.future if isinstance(f, _Recorded) else f for f in futures])
        out = [self._unwrap(f, v) if isinstance(f, _Recorded) else v for f, v in zip(futures, raw)]
        with self._lock:
            self.events.append(("gather", t, time.time(), [f.index for f in futures if isinstance(f, _Recorded)]))
        return out

    def __getattr__(self, name):
        return getattr(self._executor, name)

    def graph(self) -> dict:
        """The recorded graph: tasks (duration, CPU, worker) and the client's work between events."""
        tasks = [{"name": t["name"], "duration": max(0.0, t.get("end", t["submitted"]) - t.get("start", t["submitted"])),
                  "cpu": t.get("cpu", 0.0), "worker": t.get("worker"), "start": t.get("start", t["submitted"]) - self.t0,
                  "end": t.get("end", t["submitted"]) - self.t0} for t in self.tasks]
        steps = []  # ("client", seconds) | ("submit", index) | ("gather", [index], overhead seconds)
        last = self.t0
        for ev in self.events:
            if ev[0] == "submit":
                steps.append(("client", max(0.0, ev[1] - last)))
                steps.append(("submit", ev[2]))
                last = ev[1]
            else:
                _, t_start, t_end, idx = ev
                steps.append(("client", max(0.0, t_start - last)))
                done = max([self.tasks[i].get("end", t_start) for i in idx], default=t_start)
                steps.append(("gather", idx, max(0.0, t_end - max(done, t_start))))
                last = t_end
        return {"tasks": tasks, "steps": steps, "recorded_wall": last - self.t0}

    def finish(self, t_end: float | None = None) -> dict:
        """The graph with the client's work after its last event (up to ``t_end``, default now)."""
        g = self.graph()
        tail = max(0.0, (t_end or time.time()) - self.t0 - g["recorded_wall"])
        g["steps"].append(("client", tail))
        g["recorded_wall"] += tail
        return g


def _durations(graph: dict, use: str) -> list:
    """Each task's work in seconds: its measured wall (``wall``) or its thread's CPU (``cpu``,
    what a dedicated core would take when the recording's cores were shared)."""
    if use == "cpu":
        return [max(t["cpu"], 1e-6) if t.get("cpu") else t["duration"] for t in graph["tasks"]]
    return [t["duration"] for t in graph["tasks"]]


def replay(graph: dict, workers: int, cores: int | None = None, use: str = "wall") -> dict:
    """Predicted wall of the recorded ``graph`` on ``workers`` workers (a list scheduler,
    module docstring).  ``cores``: the machine's cores, shared equally by whatever is
    runnable (the running tasks and the client when it computes); None gives every
    worker and the client a core of its own.  ``use``: task durations (see _durations)."""
    dur = _durations(graph, use)
    steps = graph["steps"]
    if cores is None or cores >= workers + 1:
        return _replay_dedicated(dur, steps, workers)
    return _replay_shared(dur, steps, workers, cores)


def _replay_dedicated(dur: list, steps: list, workers: int) -> dict:
    free = [0.0] * max(1, int(workers))  # heap of the times each worker frees
    heapq.heapify(free)
    finish = [0.0] * len(dur)
    t = 0.0
    busy = 0.0
    for step in steps:
        if step[0] == "client":
            t += step[1]
        elif step[0] == "submit":
            i = step[1]
            start = max(t, heapq.heappop(free))
            finish[i] = start + dur[i]
            busy += dur[i]
            heapq.heappush(free, finish[i])
        else:
            _, idx, overhead = step
            t = max([t] + [finish[i] for i in idx]) + overhead
    return {"workers": int(workers), "wall": t, "task_seconds": busy}


def _replay_shared(dur: list, steps: list, workers: int, cores: int) -> dict:
    """Processor sharing: every runnable thing progresses at min(1, cores / runnable)."""
    from collections import deque

    workers = max(1, int(workers))
    queue: deque = deque()  # submitted tasks waiting for a worker, in submission order
    running: dict = {}  # task -> work left
    done: set = set()
    t = 0.0
    pos = 0
    client_left = None  # work left of the client's current segment (None: at an event)
    waiting = None  # the task indices the client's gather waits for
    while True:
        # start what the workers can take
        while queue and len(running) < workers:
            i = queue.popleft()
            running[i] = dur[i]
        # the client's next step, when it is not busy or waiting
        while client_left is None and waiting is None and pos < len(steps):
            step = steps[pos]
            pos += 1
            if step[0] == "client":
                client_left = step[1] if step[1] > 0 else None
            elif step[0] == "submit":
                queue.append(step[1])
                while queue and len(running) < workers:
                    i = queue.popleft()
                    running[i] = dur[i]
            else:
                waiting = (set(step[1]) - done, step[2])
                if not waiting[0]:
                    client_left = waiting[1] if waiting[1] > 0 else None
                    waiting = None
        client_runs = client_left is not None
        if not running and not client_runs:
            if waiting is None and pos >= len(steps):
                break
            if waiting is not None and not waiting[0]:
                client_left, waiting = (waiting[1] if waiting[1] > 0 else None), None
                continue
            if not queue:
                break  # nothing can progress (a gather of tasks never submitted)
            continue
        rate = min(1.0, cores / (len(running) + (1 if client_runs else 0)))
        dt = min([left / rate for left in running.values()] + ([client_left / rate] if client_runs else []))
        t += dt
        for i in list(running):
            running[i] -= dt * rate
            if running[i] <= 1e-12:
                del running[i]
                done.add(i)
                if waiting is not None:
                    waiting[0].discard(i)
        if client_runs:
            client_left -= dt * rate
            if client_left <= 1e-12:
                client_left = None
        if waiting is not None and not waiting[0]:
            client_left, waiting = (waiting[1] if waiting[1] > 0 else None), None
    return {"workers": workers, "wall": t, "task_seconds": sum(dur)}


def critical_path(graph: dict) -> dict:
    """The longest chain through the recorded graph (unbounded workers): its length, the
    client's share of it, the tasks on it by name, and the largest task."""
    tasks, steps = graph["tasks"], graph["steps"]
    finish = [0.0] * len(tasks)
    t = 0.0
    client = 0.0
    via: list = []  # (name, duration) of the tasks that set the client's time after each gather
    for step in steps:
        if step[0] == "client":
            t += step[1]
            client += step[1]
        elif step[0] == "submit":
            finish[step[1]] = t + tasks[step[1]]["duration"]
        else:
            _, idx, overhead = step
            late = max(idx, key=lambda i: finish[i], default=None)
            if late is not None and finish[late] > t:
                via.append((tasks[late]["name"], tasks[late]["duration"]))
                t = finish[late]
            t += overhead
            client += overhead
    on_path: dict = {}
    for name, d in via:
        on_path[name] = on_path.get(name, 0.0) + d
    largest = max(tasks, key=lambda x: x["duration"], default=None)
    by_name: dict = {}
    for x in tasks:
        by_name[x["name"]] = by_name.get(x["name"], 0.0) + x["duration"]
    return {"length": t, "client_seconds": client, "tasks_on_path": on_path,
            "largest_task": None if largest is None else {"name": largest["name"], "seconds": largest["duration"]},
            "task_seconds_by_name": by_name, "n_tasks": len(tasks)}
