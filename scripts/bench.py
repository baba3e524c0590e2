"""Benchmark one world build, stage by stage, against this machine's floor.

    python scripts/bench.py [--scale tiny|small|paper|biobank] [--world standard-01]
                            [--workers N] [--release default|noimaging|zarr] [--compare]
                            [--scaling] [--out DIR] [--json FILE] [--keep] [--pixel-sink]
                            [--set KEY=VALUE ...]

Prints a stable per-stage table (wall s, CPU s, bytes written, MB/s, peak RSS of the
whole process tree) and the same numbers as JSON.  It also measures the machine's floor
for the same output (a raw write of the same number of bytes) and reports build time /
floor.  ``--compare`` adds side-by-side comparisons in the same run: our VCF writer vs
``bgzip -@2`` (and ``plink2 --export vcf bgz`` where installed) on the same text, our
image writer vs ``np.savez_compressed`` on the same arrays, ``load_genotypes()`` vs
scikit-allel's ``read_vcf`` on the same file.  ``--scaling`` runs the build with one
worker and then with ``--workers`` and reports the speed-up of the parallel stages.

A world of another kind (``pipeline.kinds``; ``--world screening-01``) gets its own build
with per-stage wall, task CPU and peak RSS, and its kind's comparison in the same run
(screening: conformations per second beside a single-process RDKit ETKDG loop on the
first ``--etkdg`` molecules of the same library).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import psutil  # noqa: E402

from pipeline import config, kinds  # noqa: E402
from pipeline.build import build  # noqa: E402
from pipeline.graph.executor import make_executor  # noqa: E402

# Table rows: (row name, task stages summed into it, client Progress stages whose wall is used)
ROWS = [
    ("sample", (), ("sample",)),
    ("population", ("population",), ()),
    ("genotypes", ("genotypes",), ()),
    ("genotype Zarr", ("genotype_zarr",), ()),
    ("VCF", (), ("vcf",)),
    ("molecules", ("molecules", "molecules_write", "parquet_assemble", "work_partitions"), ()),
    ("disease and clinical tables", (), ("disease", "clinical")),
    ("MRI render", ("mri_render",), ()),
    ("MRI write", ("mri_write",), ()),
    ("baseline phenotype", ("baseline_phenotype",), ()),
    ("sealed", (), ("sealed",)),
    ("manifest", (), ("manifest",)),
]


class TreeSampler:
    """Samples RSS and CPU of this process and all its children (the Dask workers), and
    (``disk``: a folder) the bytes used on that folder's filesystem beyond what was used
    when sampling began: the build's peak disk need (other writers to the same disk count
    too, so measure on a quiet machine)."""

    def __init__(self, interval=0.1, disk: str | None = None):
        self.interval = interval
        self.peak = 0
        self.disk = disk
        self._disk0 = self._disk_used() if disk else 0
        self.peak_disk = 0
        self.samples: list = []  # (perf_counter time, RSS of the tree, RSS of this process)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _procs(self):
        me = psutil.Process()
        return [me] + me.children(recursive=True)

    def _rss_each(self) -> list:
        out = []
        for p in self._procs():
            try:
                out.append(p.memory_info().rss)
            except psutil.Error:
                out.append(0)
        return out

    def cpu(self) -> float:
        total = 0.0
        for p in self._procs():
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total

    def _disk_used(self) -> int:
        st = os.statvfs(self.disk)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def _run(self):
        while not self._stop.is_set():
            each = self._rss_each()
            self.peak = max(self.peak, sum(each))
            if self.disk:
                self.peak_disk = max(self.peak_disk, self._disk_used() - self._disk0)
            self.samples.append((time.perf_counter(), sum(each), each[0]))
            time.sleep(self.interval)

    def stage_peaks(self, t0: float, stages: dict) -> dict:
        """Peak tree RSS (and this process's RSS at that moment) in each client
        stage; the stages ran one after another from ``t0`` in ``stages``' order."""
        out, start = {}, t0
        for name, seconds in stages.items():
            inside = [(tree, client) for t, tree, client in self.samples if start <= t <= start + seconds]
            if inside:
                tree, client = max(inside)
                out[name] = {"peak_rss_bytes": tree, "client_rss_bytes": client}
            start += seconds
        return out

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def dir_bytes(path: str) -> int:
    total = 0
    if os.path.isfile(path):
        return os.path.getsize(path)
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def stage_bytes(world_dir: str) -> dict:
    rel, sealed = os.path.join(world_dir, "release"), os.path.join(world_dir, "sealed")
    molecules = sum(dir_bytes(os.path.join(rel, f"{t}.parquet")) for t in
                    ("proteomics", "transcriptomics", "metabolomics", "proteomics_visit2"))
    imaging = sum(dir_bytes(os.path.join(rel, d)) for d in ("imaging", "imaging_visit2", "imaging.zarr", "imaging_visit2.zarr"))
    vcf = dir_bytes(os.path.join(rel, "genotypes.vcf.gz")) + dir_bytes(os.path.join(rel, "genotypes.vcf.gz.tbi"))
    zarr_b = dir_bytes(os.path.join(rel, "genotypes.zarr"))
    manifest = dir_bytes(os.path.join(rel, "MANIFEST.json"))
    total = dir_bytes(rel) + dir_bytes(sealed)
    clinical = dir_bytes(rel) - molecules - imaging - vcf - zarr_b - manifest
    from pipeline.outputs import pixel_sink

    if pixel_sink() and os.path.exists(os.path.join(rel, "MANIFEST.json")):
        # written, verified and removed group by group: the manifest has their sizes
        doc = json.load(open(os.path.join(rel, "MANIFEST.json")))
        sunk = sum(f["size"] for f in doc["files"] if f["path"].endswith(".npz")
                   and not os.path.exists(os.path.join(rel, f["path"])))
        imaging += sunk
        total += sunk
    return {"genotype Zarr": zarr_b, "VCF": vcf, "molecules": molecules, "disease and clinical tables": clinical,
            "MRI write": imaging, "sealed": dir_bytes(sealed), "manifest": manifest, "total": total}


#: The raw-write floor is measured on at most this many bytes and scaled to the world's
#: size, so that it needs no more free disk than this beside the world (a biobank world's
#: pixels would need as much again; the rate of a 2 GiB sequential write with fsync is the
#: disk's sustained rate, past the page cache's first burst).
FLOOR_SAMPLE_BYTES = 2 << 30


def floor_seconds(directory: str, nbytes: int, sample: int = FLOOR_SAMPLE_BYTES) -> float:
    """Raw write of ``nbytes`` (incompressible, 64 MiB writes, fsync) on the output's disk:
    measured on ``min(nbytes, sample)`` bytes and scaled linearly."""
    buf = np.random.default_rng(0).integers(0, 256, 64 << 20, dtype=np.uint8).tobytes()
    path = os.path.join(directory, "floor.bin")
    written = max(1, min(int(nbytes), int(sample)))
    t = time.perf_counter()
    with open(path, "wb") as fh:
        left = written
        while left > 0:
            n = min(left, len(buf))
            fh.write(buf[:n])
            left -= n
        fh.flush()
        os.fsync(fh.fileno())
    dt = time.perf_counter() - t
    os.remove(path)
    return dt * nbytes / written


def run_build(args, workers: int, out: str) -> dict:
    overrides = [f"world={args.world}", f"scale={args.scale}", f"out={out}", f"release={args.release}",
                 "cluster=local", f"cluster.n_workers={workers}", "cluster.progress=false", *args.set]
    resolved = config.load(overrides)
    res = timed_build(resolved)
    res["bytes"] = stage_bytes(res["world_dir"])
    res["workers"] = workers
    return res


def timed_build(resolved, warm_up=None) -> dict:
    """Build ``resolved`` on a fresh executor of its cluster config, with every worker's kernels
    loaded first (``warm_up``: the kind's loader, default the biobank's) so that compile time stays
    off the clock; the build's wall, the process tree's CPU and peak RSS while it ran, overall
    and per stage."""
    from pipeline.graph.taskrecord import Recorder

    executor = make_executor(resolved.cfg.cluster)
    executor.warm_up(warm_up)
    out_dir = resolved.cfg.out if "://" not in str(resolved.cfg.out) else None
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    try:
        with TreeSampler(disk=out_dir) as sampler:
            cpu0 = sampler.cpu()
            recorder = Recorder(executor)  # every task's duration and dependencies (the scaling model)
            t0 = time.perf_counter()
            summary = build(resolved, executor=recorder, progress=False)
            wall = time.perf_counter() - t0
            graph = recorder.finish()
            cpu = sampler.cpu() - cpu0
    finally:
        executor.close()
    return {"summary": summary, "wall": wall, "cpu": cpu, "peak_rss": sampler.peak, "graph": graph,
            "peak_disk": sampler.peak_disk if out_dir else None, "disk_estimate": _disk_estimate(resolved),
            "stage_peaks": sampler.stage_peaks(t0, summary["stages"]),
            "world_dir": os.path.join(resolved.cfg.out, resolved.cfg.world.id)}


def _disk_estimate(resolved) -> int | None:
    """The preflight's estimate of the build's peak disk need (``pipeline.preflight``), if the kind has one."""
    kind = kinds.for_config(resolved.cfg)
    return int(kind.estimate(resolved.cfg).output) if kind.estimate is not None else None


def table(res: dict) -> list:
    s = res["summary"]
    tasks, stages, nbytes = s["task_seconds"], s["stages"], res["bytes"]
    rows = []
    for name, task_keys, stage_keys in ROWS:
        if task_keys:
            wall = sum(tasks.get(k, (0, 0))[0] for k in task_keys)
            cpu = sum(tasks.get(k, (0, 0))[1] for k in task_keys)
            kind = "task"
        else:
            wall = sum(stages.get(k, 0.0) for k in stage_keys)
            cpu = None
            kind = "client"
        b = nbytes.get(name, 0)
        rows.append({"stage": name, "wall_s": wall, "cpu_s": cpu, "bytes": b, "mb_per_s": (b / 1e6 / wall) if wall > 0 and b else None,
                     "timed": kind})
    return rows


def print_table(res: dict, floor: float, rows: list, out=sys.stdout) -> None:
    print(f"{'stage':<28} {'wall s':>8} {'CPU s':>8} {'MB written':>11} {'MB/s':>8}", file=out)
    for r in rows:
        cpu = "-" if r["cpu_s"] is None else f"{r['cpu_s']:.1f}"
        mbs = "-" if r["mb_per_s"] is None else f"{r['mb_per_s']:.0f}"
        print(f"{r['stage']:<28} {r['wall_s']:>8.1f} {cpu:>8} {r['bytes'] / 1e6:>11.1f} {mbs:>8}", file=out)
    total_b = res["bytes"]["total"]
    print(f"{'total (build wall)':<28} {res['wall']:>8.1f} {res['cpu']:>8.1f} {total_b / 1e6:>11.1f} {total_b / 1e6 / res['wall']:>8.0f}", file=out)
    print(f"peak RSS (process tree): {res['peak_rss'] / 2 ** 30:.2f} GiB", file=out)
    if res.get("peak_disk") is not None and res.get("disk_estimate"):
        print(f"peak disk used by the build: {res['peak_disk'] / 1e9:.2f} GB; preflight estimate "
              f"{res['disk_estimate'] / 1e9:.2f} GB ({res['disk_estimate'] / max(res['peak_disk'], 1):.2f}x)", file=out)
    peaks = ", ".join(f"{name} {p['peak_rss_bytes'] / 2 ** 30:.2f} (client {p['client_rss_bytes'] / 2 ** 30:.2f})"
                      for name, p in res.get("stage_peaks", {}).items())
    if peaks:
        print(f"peak RSS by client stage, GiB: {peaks}", file=out)
    sample = min(total_b, FLOOR_SAMPLE_BYTES)
    scaled = f" (measured on {sample / 1e6:.0f} MB, scaled)" if sample < total_b else ""
    print(f"floor: raw write of {total_b / 1e6:.0f} MB took {floor:.1f} s ({total_b / 1e6 / floor:.0f} MB/s); "
          f"build / floor = {res['wall'] / floor:.1f}{scaled}", file=out)
    print("(task stages: summed over tasks on all workers; client stages: wall on the client)", file=out)


# ------------------------------------------------------------------------- comparisons


def _warm_worker(barrier) -> None:
    from pipeline.graph.warmup import warm_up

    warm_up()
    barrier.wait()  # returns once every worker of the pool is warm


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def compare(res: dict, tmp: str) -> dict:
    from pipeline.graph.steps import contigs
    from pipeline.writers.release.vcf import DEFAULT_CHUNK_SIZE as VCF_CHUNK
    from pipeline.genotypes_io import load_genotypes, read_haplotype_blocks
    from pipeline.writers.release.vcf import write_vcf

    rel = os.path.join(res["world_dir"], "release")
    vcf = os.path.join(rel, "genotypes.vcf.gz")
    out = {}
    # -- VCF writer vs bgzip -@2 on the same text -------------------------------------
    import functools

    import zarr

    g = zarr.open_group(os.path.join(rel, "genotypes.zarr"), mode="r")
    samples = [str(x) for x in np.asarray(g["sample_id"][:]).tolist()]
    from concurrent.futures import ProcessPoolExecutor

    from pipeline.model.constants import CONTIGS

    variants = _variants_from_store(g, CONTIGS)
    ours_path = os.path.join(tmp, "ours.vcf.gz")
    # Two worker processes, started and with their kernels loaded before the clock
    # starts, as a build's cluster workers are (bgzip has no interpreter to start).
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(2)
    with ProcessPoolExecutor(2, mp_context=context, initializer=_warm_worker, initargs=(barrier,)) as pool:
        list(pool.map(int, [0, 0]))
        t_ours, _ = timed(lambda: write_vcf(ours_path, variants, samples, contigs(),
                                            functools.partial(read_haplotype_blocks, os.path.join(rel, "genotypes.zarr")),
                                            chunk_size=VCF_CHUNK, map_fn=pool.map))
    text = os.path.join(tmp, "text.vcf")
    subprocess.run(f"bgzip -dc {vcf} > {text}", shell=True, check=True)
    if shutil.which("bgzip"):
        t_bgzip, _ = timed(lambda: subprocess.run(f"bgzip -@2 -c {text} > {text}.gz", shell=True, check=True))
        out["vcf_vs_bgzip"] = {"ours_s": t_ours, "bgzip_s": t_bgzip, "speedup": t_bgzip / t_ours,
                               "ours_mb": os.path.getsize(ours_path) / 1e6, "bgzip_mb": os.path.getsize(text + ".gz") / 1e6,
                               "size_ratio": os.path.getsize(ours_path) / os.path.getsize(text + ".gz"),
                               "text_mb": os.path.getsize(text) / 1e6}
        subprocess.run(["bgzip", "-t", ours_path], check=True)
        if shutil.which("bcftools"):
            subprocess.run(["bcftools", "view", "-H", ours_path], check=True, stdout=subprocess.DEVNULL)
    if shutil.which("plink2"):
        t_plink, _ = timed(lambda: subprocess.run(["plink2", "--vcf", vcf, "--export", "vcf", "bgz", "--threads", "2",
                                                   "--out", os.path.join(tmp, "plink")], check=True,
                                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        out["vcf_vs_plink2"] = {"ours_s": t_ours, "plink2_s": t_plink, "speedup": t_plink / t_ours}
    os.remove(text)
    # -- image writer vs np.savez_compressed on the same arrays ---------------------------
    import glob

    from pipeline.imaging.writer import write_npz

    files = sorted(glob.glob(os.path.join(rel, "imaging", "*.npz")))[:100]
    if files:
        arrays = []
        for f in files:
            with np.load(f) as z:
                arrays.append((z["cine"], z["t1map"]))

        # Both write the same arrays to files in the same folder, one subject at a time.
        def ours():
            total = 0
            for i, (c, t) in enumerate(arrays):
                p = os.path.join(tmp, f"ours{i}.npz")
                total += write_npz(p, c, t)
                os.remove(p)
            return total

        def numpy_ref():
            total = 0
            for i, (c, t) in enumerate(arrays):
                p = os.path.join(tmp, f"ref{i}.npz")
                np.savez_compressed(p, cine=c, t1map=t)
                total += os.path.getsize(p)
                os.remove(p)
            return total

        ours()  # compile the kernel outside the timing
        t_o, size_o = timed(ours)
        t_n, size_n = timed(numpy_ref)
        out["npz_vs_savez_compressed"] = {"ours_s": t_o, "numpy_s": t_n, "speedup": t_n / t_o, "size_ratio": size_o / size_n,
                                          "subjects": len(arrays)}
    # -- load_genotypes vs scikit-allel read_vcf -------------------------------------------
    t_load, df = timed(lambda: load_genotypes(rel))
    out["load_genotypes"] = {"seconds": t_load, "shape": list(df.shape), "dtype": str(df.dtypes.iloc[0])}
    del df
    try:
        import allel

        t_allel, _ = timed(lambda: allel.read_vcf(vcf, fields=["calldata/GT"]))
        out["load_genotypes_vs_allel"] = {"ours_s": t_load, "allel_s": t_allel, "speedup": t_allel / t_load}
    except ImportError:
        pass
    return out


def _variants_from_store(g, contig_names):
    import pandas as pd

    contig_id = [str(x) for x in np.asarray(g["contig_id"][:]).tolist()]
    alleles = np.array(np.asarray(g["variant_allele"][:]).tolist(), dtype=object)
    return pd.DataFrame({
        "contig": np.asarray(contig_id, dtype=object)[np.asarray(g["variant_contig"][:])],
        "position": np.asarray(g["variant_position"][:]).astype(np.int64),
        "id": [str(x) for x in np.asarray(g["variant_id"][:]).tolist()],
        "ref": alleles[:, 0].astype(object), "alt": alleles[:, 1].astype(object),
    })


#: Worker counts the scaling model predicts the build's wall for.
MODEL_WORKERS = (1, 2, 8, 32, 128)


def scaling_model(res: dict) -> dict:
    """The recorded task graph of ``res`` replayed through a list scheduler on
    MODEL_WORKERS workers (``pipeline.graph.taskrecord``), with its critical path."""
    from pipeline.graph.taskrecord import critical_path, replay

    graph = res["graph"]
    pred = {w: replay(graph, w)["wall"] for w in MODEL_WORKERS}
    cp = critical_path(graph)
    return {"recorded_workers": res.get("workers"), "measured_wall_s": res["wall"],
            "predicted_wall_s": {str(w): v for w, v in pred.items()},
            "predicted_speedup_vs_1": {str(w): pred[1] / v for w, v in pred.items()},
            "critical_path_s": cp["length"], "client_serial_s": cp["client_seconds"],
            "tasks_on_critical_path_s": cp["tasks_on_path"], "largest_task": cp["largest_task"],
            "task_seconds_by_name": cp["task_seconds_by_name"], "n_tasks": cp["n_tasks"]}


def model_checks(res: dict, one: dict, workers: int) -> dict:
    """Each recording (1 worker, ``workers`` workers) replayed for 1 and ``workers``
    workers on this machine's cores (shared by the tasks and the client), against the
    measured walls: relative errors."""
    from pipeline.graph.taskrecord import replay

    cores = os.cpu_count() or 1
    measured = {1: one["wall"], workers: res["wall"]}
    out = {}
    for rec_w, graph in ((1, one["graph"]), (workers, res["graph"])):
        for w in sorted(measured):
            p = replay(graph, w, cores=cores)["wall"]
            out[f"recorded_{rec_w}_predict_{w}"] = {"predicted_s": p, "measured_s": measured[w], "error": p / measured[w] - 1}
    return out


def print_model(model: dict, out=sys.stdout) -> None:
    pred, speed = model["predicted_wall_s"], model["predicted_speedup_vs_1"]
    print("\nscaling model (recorded task graph replayed through a list scheduler):", file=out)
    print("  workers: " + ", ".join(f"{w} -> {pred[w]:.1f}s ({speed[w]:.1f}x)" for w in pred), file=out)
    lt = model["largest_task"] or {"name": "-", "seconds": 0.0}
    on = ", ".join(f"{k} {v:.1f}s" for k, v in sorted(model["tasks_on_critical_path_s"].items(), key=lambda kv: -kv[1]))
    print(f"  critical path {model['critical_path_s']:.1f}s: client {model['client_serial_s']:.1f}s + tasks ({on or 'none'}); "
          f"largest task {lt['name']} {lt['seconds']:.1f}s of {model['n_tasks']} tasks", file=out)
    for label, c in model.get("checks", {}).items():
        print(f"  check {label.replace('_', ' ')} workers: predicted {c['predicted_s']:.1f}s, measured {c['measured_s']:.1f}s, "
              f"error {100 * c['error']:+.1f} %", file=out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="tiny")
    ap.add_argument("--world", default="standard-01")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--release", default="default")
    ap.add_argument("--compare", action="store_true")
    ap.add_argument("--scaling", action="store_true")
    ap.add_argument("--out", default=None, help="build folder (default: a temporary folder, removed unless --keep)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="another config override, e.g. --set scale.participants=200000 --set scale.imaged=40000")
    ap.add_argument("--pixel-sink", action="store_true",
                    help="write each image group, verify it against its SHA-256 and remove it (pipeline.graph.imaging."
                         "PIXEL_SINK_ENV): pixels at any scale on a small disk")
    ap.add_argument("--etkdg", type=int, default=200, help="screening worlds: molecules in the single-process RDKit ETKDG comparison")
    args = ap.parse_args()
    if args.pixel_sink:  # before the cluster starts: its workers inherit it
        from pipeline.outputs import PIXEL_SINK_ENV

        os.environ[PIXEL_SINK_ENV] = "1"
    kind = kinds.for_config(config.compose([f"world={args.world}"]))
    if kind is not kinds.BIOBANK:  # another kind of world (pipeline.kinds): its build, with its own comparison
        return kind_bench(args, kind)
    tmp = args.out or tempfile.mkdtemp(prefix="dtw-bench-")
    os.makedirs(tmp, exist_ok=True)
    report = {"machine": {"cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2 ** 30, 1),
                          "platform": platform.platform(), "python": platform.python_version()},
              "scale": args.scale, "world": args.world, "release": args.release, "workers": args.workers}
    try:
        res = run_build(args, args.workers, os.path.join(tmp, "build"))
        floor = floor_seconds(tmp, res["bytes"]["total"])
        rows = table(res)
        print(f"DrugTargetWorld bench: world={args.world} scale={args.scale} release={args.release} "
              f"workers={args.workers} on {report['machine']['cpus']} CPUs, {report['machine']['memory_gib']} GiB"
              + (" (pixel sink: images verified and removed group by group)" if args.pixel_sink else ""))
        print_table(res, floor, rows)
        report.update({"stages": rows, "build_wall_s": res["wall"], "build_cpu_s": res["cpu"], "peak_rss_bytes": res["peak_rss"],
                       "bytes_written": res["bytes"]["total"], "floor_s": floor, "build_over_floor": res["wall"] / floor,
                       "client_stages": res["summary"]["stages"], "peak_rss_by_client_stage": res["stage_peaks"],
                       "peak_disk_bytes": res.get("peak_disk"), "preflight_disk_estimate_bytes": res.get("disk_estimate"),
                       "task_seconds": {k: list(v) for k, v in res["summary"]["task_seconds"].items()}})
        if args.compare:
            cmp = compare(res, tmp)
            report["compare"] = cmp
            print("\ncomparisons (same machine, same run):")
            for k, v in cmp.items():
                print(f"  {k}: " + ", ".join(f"{a}={b:.3g}" if isinstance(b, float) else f"{a}={b}" for a, b in v.items()))
        model = scaling_model(res)
        report["scaling_model"] = model
        if args.scaling:
            if not args.keep:  # one world on disk at a time
                shutil.rmtree(os.path.join(tmp, "build"), ignore_errors=True)
            one = run_build(args, 1, os.path.join(tmp, "build1"))
            if not args.keep:
                shutil.rmtree(os.path.join(tmp, "build1"), ignore_errors=True)
            parallel = ("population", "genotypes", "genotype_zarr", "molecules", "molecules_write", "mri_render",
                        "mri_write", "baseline_phenotype")
            def par_wall(r):
                return sum(r["summary"]["stages"].get(k, 0.0) for k in ("population+genotypes", "molecules", "imaging"))
            report["scaling"] = {"one_worker_wall_s": one["wall"], "n_worker_wall_s": res["wall"],
                                 "parallel_stages_one_s": par_wall(one), "parallel_stages_n_s": par_wall(res),
                                 "speedup_parallel_stages": par_wall(one) / max(par_wall(res), 1e-9),
                                 "stages": list(parallel)}
            sc = report["scaling"]
            print(f"\nscaling: parallel stages {sc['parallel_stages_one_s']:.1f}s with 1 worker, {sc['parallel_stages_n_s']:.1f}s "
                  f"with {args.workers}: {sc['speedup_parallel_stages']:.2f}x; whole build {one['wall']:.1f}s -> {res['wall']:.1f}s")
            model["checks"] = model_checks(res, one, args.workers)
        print_model(model)
        js = json.dumps(report, indent=2, default=float)
        if args.json:  # the file has the recorded task graph too (the model's input)
            Path(args.json).write_text(json.dumps({**report, "task_graph": res["graph"]}, indent=2, default=float))
        print("\nJSON:")
        print(js)
    finally:
        if not args.keep and not args.out:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def kind_bench(args, kind) -> int:
    """A world of another kind on a fresh local cluster (the kind's kernels loaded on every
    worker first): per-stage wall, task CPU, peak RSS of the process tree, and the kind's
    own comparison (KIND_COMPARISONS) in the same run."""
    tmp = args.out or tempfile.mkdtemp(prefix="dtw-bench-")
    os.makedirs(tmp, exist_ok=True)
    try:
        out = os.path.join(tmp, "build")
        resolved = config.load([f"world={args.world}", f"scale={args.scale}", f"out={out}", "cluster=local",
                                f"cluster.n_workers={args.workers}", "cluster.progress=false"])
        kind.warm_up()  # the client runs parts of the build too
        res = timed_build(resolved, kind.warm_up)
        summary, wall, cpu, world_dir = res["summary"], res["wall"], res["cpu"], res["world_dir"]
        nbytes = dir_bytes(world_dir)
        print(f"DrugTargetWorld bench: world={args.world} ({kind.name}) scale={args.scale} workers={args.workers} "
              f"on {os.cpu_count()} CPUs, {round(psutil.virtual_memory().total / 2 ** 30, 1)} GiB")
        print(f"{'stage':<28} {'wall s':>8}")
        for name, seconds in summary["stages"].items():
            print(f"{name:<28} {seconds:>8.1f}")
        for name, (w, c) in summary["task_seconds"].items():
            print(f"  tasks: {name:<19} {w:>8.1f}  (summed over workers; CPU {c:.1f} s)")
        print(f"{'total (build wall)':<28} {wall:>8.1f}   CPU {cpu:.1f} s, {nbytes / 1e6:.1f} MB written")
        print(f"peak RSS (process tree): {res['peak_rss'] / 2 ** 30:.2f} GiB")
        report = {"world": args.world, "kind": kind.name, "scale": args.scale, "workers": args.workers,
                  "build_wall_s": wall, "build_cpu_s": cpu, "peak_rss_bytes": res["peak_rss"], "bytes_written": nbytes,
                  "stages": summary["stages"], "task_seconds": {k: list(v) for k, v in summary["task_seconds"].items()}}
        comparison = KIND_COMPARISONS.get(kind.name)
        if comparison is not None:
            report.update(comparison(args, summary, wall, world_dir))
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2, default=float))
        print("\nJSON:")
        print(json.dumps(report, indent=2, default=float))
    finally:
        if not args.keep and not args.out:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def etkdg_comparison(args, summary: dict, wall: float, world_dir: str) -> dict:
    """Screening worlds: conformations per second of the whole build beside a single-process
    RDKit ETKDG loop (ETKDGv3 + hydrogens, as a conformer generator would run) on the first
    ``--etkdg`` molecules of the same library, in the same run."""
    import pyarrow.parquet as pq
    from rdkit import Chem, RDLogger
    from rdkit.Chem import AllChem

    from pipeline.screening.bundle import LIBRARY

    n = summary["conformations"]
    ours = n / wall
    RDLogger.DisableLog("rdApp.*")
    smiles = pq.read_table(os.path.join(world_dir, "release", LIBRARY), columns=["smiles"]).slice(0, args.etkdg)
    smiles = smiles.column("smiles").to_pylist()
    t1 = time.perf_counter()
    embedded = 0
    for i, smi in enumerate(smiles):
        params = AllChem.ETKDGv3()
        params.randomSeed = i
        embedded += AllChem.EmbedMolecule(Chem.AddHs(Chem.MolFromSmiles(smi)), params) == 0
    etkdg_s = time.perf_counter() - t1
    etkdg = len(smiles) / etkdg_s
    print(f"\nconformations/s: ours {ours:,.0f} ({n:,} conformations, whole build, {args.workers} workers, docking and "
          f"writing included); RDKit ETKDG single process {etkdg:,.1f} ({etkdg_s / len(smiles) * 1000:.1f} ms a molecule, "
          f"{embedded}/{len(smiles)} embedded): {ours / etkdg:.1f}x")
    return {"conformations": n, "conformations_per_s": ours, "etkdg_per_s": etkdg, "speedup_vs_etkdg": ours / etkdg}


#: kind name -> its comparison in the same run (pipeline.kinds; the biobank one is --compare).
KIND_COMPARISONS = {"screening": etkdg_comparison}


if __name__ == "__main__":
    sys.exit(main())
