"""Checks against the machine, made after the config is valid and before any
compute: the output location (protocol, filesystem package, a folder that can
be written; a remote filesystem that connects and answers, within 30 s:
``pipeline.locations``), the environment (``SOURCE_DATE_EPOCH``), the scheduler of
``cluster=address`` (answers within seconds), and the memory and disk a build
of the requested size needs against what this machine and its workers have.
The command lines (``pipeline.build``, ``pipeline.panel``) first run
:func:`check_command`, which needs nothing of the machine and so runs for
``--cfg job`` too: ``SOURCE_DATE_EPOCH``, and an ``out=`` that fsspec knows,
can write and that outlives the process (not ``memory://``, which the Python
API keeps).

Each problem is a :class:`pipeline.config.ConfigError`: one line naming the
field, the value and what is valid.  The size figures are estimates calibrated
on the bench runs in docs/performance.md (paper and biobank scale, two workers); they
are meant to refuse what cannot fit, not to predict the peak to the megabyte.
"""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from .config import ConfigError, Resolved, memory_limit_bytes
from .locations import check_out, check_out_url, check_outlives_process, filesystem_class, local_path, protocols_of
from .outputs import SUBJECTS_PER_TASK, pixel_sink

SCHEDULER_TIMEOUT = 5.0  #: seconds to wait for cluster.address to accept a connection

# --- the size model (bytes), calibrated on scripts/bench.py runs -------------------
CLIENT_BASE = 350 * 2**20  #: the driving process with its imports (measured 0.20 GiB) and headroom
CLIENT_PER_PARTICIPANT = 4096  #: population-stage vectors (measured 2.8 kB at 54,000 and 500,000)
TASK_BASE = 256 * 2**20  #: a worker process with the kernels loaded
TASK_PER_VALUE = 40  #: float64 molecule values and their copies (raw, measured, standardised, written)
TASK_PER_GENOTYPE = 10  #: haplotypes (2 x int8) and a standardised dosage per variant
OUT_PER_OMICS_VALUE = 3.5  #: compressed float32 protein, transcript and metabolite values (3.6 measured at paper scale)
OUT_PER_OMICS_WORK_VALUE = 4.0  #: the same values in the float32 work columns the Parquet row groups are encoded from
OUT_PER_GENOTYPE_VCF = 0.34
OUT_PER_GENOTYPE_ZARR = 0.19
OUT_PER_SCAN = 1.246e6  #: one participant's npz: the cine stored (1.23 MB), the T1 map deflated
OUT_PER_PARTICIPANT = 400  #: clinical tables, dictionary and sealed files


@dataclass(frozen=True)
class Estimate:
    """What one world build needs, in bytes (approximate)."""

    client: int  #: peak memory of the process driving the build
    task: int  #: peak memory of one block task on a worker
    output: int  #: bytes on disk at the build's largest (release, sealed and work files)


def estimate(cfg) -> Estimate:
    s, w, r, c = cfg.scale, cfg.world, cfg.release, cfg.cluster
    n, p, m, v = int(s.participants), int(s.proteins), int(s.metabolites), int(s.variants)
    per_task = min(n, int(c.chunk_blocks) * 1000)
    task = TASK_BASE + per_task * (TASK_PER_VALUE * (2 * p + m) + TASK_PER_GENOTYPE * v)
    visit2 = n * float(w.visit2_fraction)
    # at assembly's peak three copies exist: the float32 work columns, the Parquet row groups
    # encoded from them and the stitched release tables (bench, paper scale: 4.07 GB peak)
    omics = (OUT_PER_OMICS_WORK_VALUE + 2 * OUT_PER_OMICS_VALUE) * ((2 * p + m) * n + p * visit2)
    genotypes = (OUT_PER_GENOTYPE_VCF * n * v if r.vcf else 0) + (OUT_PER_GENOTYPE_ZARR * n * v if (r.vcf or r.genotype_zarr) else 0)
    scans = 0 if r.imaging == "none" else int(s.imaged) * (1 + (float(w.visit2_fraction) if r.visit2_imaging else 0))
    if scans and pixel_sink():  # each image group is verified and removed: only the groups in flight
        scans = min(scans, SUBJECTS_PER_TASK * max(1, int(c.n_workers or os.cpu_count() or 1)))
    output = omics + genotypes + OUT_PER_SCAN * scans + OUT_PER_PARTICIPANT * n
    return Estimate(client=int(CLIENT_BASE + CLIENT_PER_PARTICIPANT * n), task=int(task), output=int(output))


def human(nbytes: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if nbytes >= size:
            return f"{nbytes / size:,.1f} {unit}"
    return f"{nbytes / 2**10:,.1f} KiB"


def machine_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().total)


# --------------------------------------------------------------------------- checks


def check(resolved: Resolved, own_executor: bool = True, concurrent: int = 1, scheduler: bool = True,
          disk: bool = True) -> Estimate:
    """Every machine check for one world build (``concurrent`` builds at once on
    one client, as a panel runs them); returns the size estimate."""
    from . import kinds

    cfg = resolved.cfg
    check_source_date()
    check_out(str(cfg.out), str(cfg.world.id), str(cfg.cluster.kind))
    kind = kinds.for_resolved(resolved)
    if kind.estimate is None:  # a kind without a size model (the tests' toy kind)
        est = Estimate(client=0, task=0, output=0)
    else:
        est = kind.estimate(cfg)
    if kind is kinds.BIOBANK:  # the memory model and its messages are the biobank build's
        check_memory(cfg, est, concurrent)
    if disk:
        check_disk(str(cfg.out), est.output)
    if own_executor and scheduler and cfg.cluster.kind == "address":
        check_scheduler(str(cfg.cluster.address))
    return est


def check_command(resolved: Resolved) -> None:
    """The checks of a command line's build that need nothing of the machine (its memory,
    disk, network or folders): ``SOURCE_DATE_EPOCH``, and an ``out=`` whose protocol is
    known, installed, writable and outlives the process.  ``--cfg job`` runs these with
    the config's validation; a build runs them and then :func:`check`."""
    url = str(resolved.cfg.out)
    check_source_date()
    check_out_url(url)
    check_outlives_process(url)


def check_source_date() -> None:
    from .bundle import source_date

    try:
        source_date()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def check_memory(cfg, est: Estimate, concurrent: int = 1) -> None:
    total = machine_memory()
    c = cfg.cluster
    client = est.client * max(1, concurrent)
    if c.kind == "sync":
        client += est.task  # tasks run in the driving process
    if client > total:
        most = max(0, int((total / max(1, concurrent) - CLIENT_BASE - (est.task if c.kind == "sync" else 0)) / CLIENT_PER_PARTICIPANT))
        raise ConfigError(f"scale.participants: {cfg.scale.participants:,} participants need about {human(client)} of memory on the "
                          f"driving process; this machine has {human(total)}; valid: up to about {most:,} participants here")
    if c.kind != "local":
        return  # an address cluster's workers are sized by whoever started them
    cores = os.cpu_count() or 1
    n_workers = int(c.n_workers or cores)
    limit = memory_limit_bytes(c.memory_limit, total, threads=int(c.threads_per_worker), cores=cores)
    if limit is not None and est.task > limit:
        raise ConfigError(f"cluster.memory_limit: one task of {min(int(cfg.scale.participants), int(c.chunk_blocks) * 1000):,} "
                          f"participants x {int(cfg.scale.proteins):,} proteins needs about {human(est.task)}, over the workers' limit "
                          f"of {human(limit)} ({c.memory_limit}); valid: a larger limit, or a smaller cluster.chunk_blocks")
    workers = n_workers * est.task
    if client + workers > total:
        fit = max(0, int((total - client) // est.task))
        raise ConfigError(f"cluster.n_workers: {n_workers} workers at about {human(est.task)} each plus the driving process "
                          f"need about {human(client + workers)}; this machine has {human(total)}; valid: at most {fit} workers "
                          "here, or a smaller cluster.chunk_blocks")


def check_disk(url: str, need: int) -> None:
    import shutil

    try:
        cls = filesystem_class(url)
    except ConfigError:
        return
    if not {"file", "local"} & set(protocols_of(cls)):
        return
    path = local_path(url)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    free = shutil.disk_usage(path).free
    if need > free:
        raise ConfigError(f"out: the build needs about {human(need)} of disk and {path} has {human(free)} free; valid: a location "
                          "with more space, a smaller scale, or release=noimaging")


def check_scheduler(address: str, timeout: float = SCHEDULER_TIMEOUT) -> None:
    """A TCP connection to the scheduler, so a wrong address is one line within
    seconds rather than a traceback when the client gives up."""
    scheme, _, rest = address.partition("://")
    if scheme not in ("tcp", "tls"):
        return  # other transports are checked by the client's own (10 s) timeout
    host, _, port = rest.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        port_number = int(port.split("/")[0])
    except ValueError:
        raise ConfigError(f"cluster.address: {address!r} has no port; valid: {scheme}://host:port such as tcp://127.0.0.1:8786") from None
    try:
        with socket.create_connection((host, port_number), timeout=timeout):
            pass
    except OSError as exc:
        reason = f"no answer within {timeout:g} s" if isinstance(exc, socket.timeout) else (exc.strerror or type(exc).__name__)
        raise ConfigError(f"cluster.address: no scheduler at {address} ({reason}); valid: the address a running "
                          "`dask scheduler` prints") from None


def check_all(worlds: list, own_executor: bool = True, concurrent: int = 1) -> None:
    """Checks for several worlds built by one command (a panel, a multirun):
    memory for ``concurrent`` builds at once, disk for all of them together,
    the scheduler tried once."""
    need: dict = {}
    for i, resolved in enumerate(worlds):
        est = check(resolved, own_executor=own_executor, concurrent=concurrent, scheduler=(i == 0), disk=False)
        need[str(resolved.cfg.out)] = need.get(str(resolved.cfg.out), 0) + est.output
    for url, nbytes in need.items():
        check_disk(url, nbytes)
