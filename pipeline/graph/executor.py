"""Where tasks run: an in-process ``distributed.LocalCluster`` (default), an
existing scheduler (``cluster.address``) or a synchronous in-process executor
for debugging.  Outputs never depend on which one is used: every task is a pure
function of the world, its fixed participant blocks and named streams.
"""
from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections import deque
from typing import Any, Callable, Iterable, Iterator


class SyncFuture:
    def __init__(self, fn, args, kwargs):
        self._fn, self._args, self._kwargs = fn, args, kwargs
        self._done = False
        self._value = None

    def done(self) -> bool:
        return self._done

    def result(self) -> Any:
        if not self._done:
            args = [a.result() if isinstance(a, SyncFuture) else a for a in self._args]
            self._value = self._fn(*args, **self._kwargs)
            self._done = True
        return self._value


class SyncExecutor:
    """Runs each task lazily in the calling thread (cluster=sync)."""

    kind = "sync"
    n_workers = 1

    def submit(self, fn: Callable, *args, key: str | None = None, **kwargs) -> SyncFuture:
        return SyncFuture(fn, args, kwargs)

    def scatter(self, obj: Any) -> Any:
        return obj

    def gather(self, futures: Iterable) -> list:
        return [f.result() if isinstance(f, SyncFuture) else f for f in futures]

    def warm_up(self, fn: Callable | None = None) -> None:
        """Run ``fn`` (default: the biobank kernels' warm-up; another kind of world brings its own)."""
        from .warmup import warm_up

        (fn or warm_up)()

    def on_workers(self, fn: Callable, *args) -> list:
        """``fn(*args)`` where the tasks run (here), as a one-item list."""
        return [fn(*args)]

    def close(self) -> None:
        pass


def _numba_threads(n: int, fn: Callable, *args, **kwargs):
    """Run ``fn`` with this thread's Numba kernels limited to ``n`` threads.

    The width is set in the task's own thread, at run time: a worker's
    NUMBA_NUM_THREADS cannot be set through the nanny's ``env`` (applied after the
    worker process has imported Numba, so Numba keeps the default, and its first
    compilation after the thread pool started then fails with "Cannot set
    NUMBA_NUM_THREADS to a different value").  ``numba.set_num_threads`` is
    per-thread and may only lower the pool's width.
    """
    import numba

    numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
    return fn(*args, **kwargs)


class DaskExecutor:
    """Futures on a ``distributed.Client``.  Task keys are deterministic names so
    that the dashboard and logs show which world and stage a task belongs to.
    ``numba_threads`` (local clusters) caps each task's Numba thread count."""

    kind = "dask"

    def __init__(self, client, owns_cluster=None, numba_threads: int | None = None):
        self.client = client
        self._cluster = owns_cluster
        self._numba_threads = numba_threads

    @property
    def n_workers(self) -> int:
        return max(1, len(self.client.scheduler_info().get("workers", {})))

    def submit(self, fn: Callable, *args, key: str | None = None, **kwargs):
        if key is not None:
            import uuid

            key = f"{key}-{uuid.uuid4().hex[:8]}"
        if self._numba_threads:
            return self.client.submit(_numba_threads, self._numba_threads, fn, *args, key=key, pure=False, **kwargs)
        return self.client.submit(fn, *args, key=key, pure=False, **kwargs)

    def scatter(self, obj: Any) -> Any:
        # Wrapped in a list: distributed scatters a dict as {key: value} with the
        # dict's own keys as task keys, which would collide between worlds built
        # concurrently (every world's "protein_mean" would be one future).
        return self.client.scatter([obj], broadcast=True, hash=False)[0]

    def gather(self, futures):
        return self.client.gather(list(futures))

    def warm_up(self, fn: Callable | None = None) -> None:
        """Load the kernels on every worker now (benchmarks time steady-state work): ``fn``, by
        default the biobank kernels' warm-up (another kind of world brings its own)."""
        from .warmup import warm_up

        self.client.run(fn or warm_up)

    def on_workers(self, fn: Callable, *args) -> list:
        """``fn(*args)`` on every worker (each worker's own answer, e.g. about its machine)."""
        return list(self.client.run(fn, *args).values())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
        if self._cluster is not None:
            with contextlib.suppress(Exception):
                self._cluster.close()


def _silence_distributed_logs():
    import logging

    for name in ("distributed", "distributed.worker", "distributed.scheduler", "distributed.nanny", "bokeh", "tornado"):
        logging.getLogger(name).setLevel(logging.ERROR)


SCHEDULER_TIMEOUT = "10s"  #: how long a client waits for cluster.address before the build is refused


def dashboard_link(client: Any, address: str | None) -> str | None:
    """The dashboard's URL.  Built from the port the scheduler reports, because
    distributed's own link names the scheduler's host, which for a threaded
    local cluster is the machine's external address, not where it listens."""
    port = client.scheduler_info().get("services", {}).get("dashboard")
    if not port:
        return None
    host = (address or "").rpartition(":")[0].strip("[]")
    if address is None or host in ("", "0.0.0.0", "::"):
        return client.dashboard_link
    return f"http://{host}:{port}/status"


def make_executor(cluster_cfg: Any, processes: bool = True, announce: bool | None = None) -> Any:
    """Build the executor for ``cluster_cfg`` (the ``cluster`` config group).
    ``processes=False`` runs the local cluster's workers as threads (needed when
    the output filesystem lives inside this process, as memory:// does).
    ``announce`` prints the Dask dashboard's link on stderr (default: when
    ``cluster.progress`` is on)."""
    kind = cluster_cfg.kind
    if announce is None:
        announce = bool(cluster_cfg.get("progress", True))
    if kind == "sync":
        return SyncExecutor()
    _silence_distributed_logs()
    from distributed import Client, LocalCluster

    if kind == "address":
        from ..config import ConfigError

        try:
            client = Client(cluster_cfg.address, timeout=SCHEDULER_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            raise ConfigError(f"cluster.address: no scheduler answered at {cluster_cfg.address} within {SCHEDULER_TIMEOUT} "
                              f"({type(exc).__name__}); valid: the address a running `dask scheduler` prints") from None
        if announce:
            link = client.dashboard_link
            log(f"dask: joined {cluster_cfg.address} ({len(client.scheduler_info().get('workers', {}))} workers); dashboard {link}")
        return DaskExecutor(client)
    n_workers = cluster_cfg.n_workers or max(1, os.cpu_count() or 1)
    dashboard = cluster_cfg.get("dashboard_address")
    with warnings.catch_warnings():
        # "Port 8787 is already in use ... on port N instead": the link printed below has the real port
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        cluster = LocalCluster(
            n_workers=n_workers,
            threads_per_worker=int(cluster_cfg.threads_per_worker),
            processes=processes,
            memory_limit=cluster_cfg.memory_limit,
            dashboard_address=dashboard,
            silence_logs=40,
            # Parallelism comes from the workers: each task's Numba kernels run on
            # threads_per_worker threads (set per task, see _numba_threads), so N
            # workers use N cores and adding workers scales the build.
            **({} if not processes else {"env": {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}}),
        )
    client = Client(cluster)
    if announce:
        link = dashboard_link(client, dashboard) if dashboard else None
        log(f"dask: local cluster of {n_workers} worker {'processes' if processes else 'threads'}; "
            + (f"dashboard {link}" if link else "no dashboard (cluster.dashboard_address=null)"))
    return DaskExecutor(client, owns_cluster=cluster, numba_threads=int(cluster_cfg.threads_per_worker))


class Tracked:
    """The executor as the build's steps see it: every submitted task is counted in
    the current stage's progress (tasks done / submitted)."""

    def __init__(self, executor, progress):
        self._executor, self._progress = executor, progress

    def submit(self, fn: Callable, *args, **kwargs):
        future = self._executor.submit(fn, *args, **kwargs)
        self._progress.track(future)
        return future

    def __getattr__(self, name):
        return getattr(self._executor, name)


def windowed_map(executor: Any, fn: Callable, tasks: Iterable, window: int = 8) -> Iterator:
    """Yield ``fn(task)`` in task order with at most ``window`` tasks in flight, so
    results stream to the writer in bounded memory."""
    pending = deque()
    it = iter(tasks)
    for task in it:
        pending.append(executor.submit(fn, task))
        if len(pending) >= window:
            break
    for task in it:
        yield executor.gather([pending.popleft()])[0]
        pending.append(executor.submit(fn, task))
    while pending:
        yield executor.gather([pending.popleft()])[0]


def chunks(seq: list, size: int) -> list:
    return [seq[i:i + size] for i in range(0, len(seq), size)]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
