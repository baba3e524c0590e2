"""The analysis as resumable tasks; each turn runs as many as fit in its time.

Order: inventory -> clinical -> imaging (baseline, then repeat scans; chunked)
-> phenotype -> genome scan (chunked) -> evidence and claims (with the
experiment plan) -> experiments (read, follow up) -> final submission.
"""
from __future__ import annotations

import glob
import os
import time

import numpy as np
import pandas as pd

from . import analysis, experiments
from . import claims as claims_mod
from . import data, evidence, genetics, imaging, phenotype, report
from .store import Clock, Store

TASKS = ("inventory", "clinical", "imaging", "imaging_v2", "phenotype", "scan", "table", "evidence", "experiments",
         "final")


def log(*parts) -> None:
    print(*parts, flush=True)


# ----------------------------------------------------------------------------- inventory


def task_inventory(ctx, store: Store, clock: Clock) -> bool:
    release = ctx["RELEASE"]
    names = sorted(os.listdir(release))
    log("release holds:", ", ".join(names))
    cov = data.load_covariates(release)
    log(f"participants {len(cov)}; covariates resolved: {', '.join(c for c in cov.columns)}")
    if "imaged" in cov:
        log(f"imaged {int(cov['imaged'].sum())}; visit 2 {int(cov.get('visit2', pd.Series(False)).sum())}")
    # A provisional, empty answer: an episode cut short must still hold a valid submission.
    if not os.path.exists(os.path.join(ctx["WORK"], "submission.json")):
        claims_mod.write_submission(ctx["WORK"], claims_mod.empty_claims())
    return True


# ----------------------------------------------------------------------------- clinical


def task_clinical(ctx, store: Store, clock: Clock) -> bool:
    release = ctx["RELEASE"]
    cov = data.load_covariates(release)
    index = cov.index
    store.write_frame("covariates.parquet", cov.drop(columns=[c for c in ("date",) if c in cov]).assign(
        date=pd.to_datetime(cov["date"], errors="coerce") if "date" in cov else pd.NaT))
    store.write_frame("ecg.parquet", data.ecg_features(release, index))
    store.write_frame("ct.parquet", data.ct_features(release, index))
    store.write_frame("clin.parquet", data.clinical_features(release, cov, index))
    store.write_frame("outcomes.parquet", data.outcomes(release, cov, index))
    prot = data.read_table(release, "proteomics.parquet").reindex(index)
    store.write_json("proteins.json", list(prot.columns))
    store.write_array("proteins.npy", genetics.standardise(prot.to_numpy()))
    log(f"clinical tables cached: ECG, CT, {store.read_frame('clin.parquet').shape[1]} record features, outcomes; "
        f"{prot.shape[1]} proteins")
    return True


# ----------------------------------------------------------------------------- imaging


def _measure_batch(paths):
    ids, rows = imaging.measure_files(paths)
    return ids, rows


def task_imaging(ctx, store: Store, clock: Clock, folder: str = "imaging", tag: str = "img") -> bool:
    path = os.path.join(ctx["RELEASE"], folder)
    files = sorted(glob.glob(os.path.join(path, "*.npz"))) if os.path.isdir(path) else []
    key = f"{tag}_next"
    start = int(store.state.get(key, 0))
    if not files:
        log(f"no {folder}/ in the release")
        return True
    if start >= len(files):
        return True
    from concurrent.futures import ProcessPoolExecutor

    try:
        workers = max(1, min(4, len(os.sched_getaffinity(0))))
    except AttributeError:
        workers = max(1, min(4, os.cpu_count() or 1))
    batch = 40
    done_here = 0
    t0 = time.monotonic()
    chunk_ids, chunk_rows = [], []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        pos = start
        while pos < len(files) and clock.has(20):
            # Keep every worker busy with a few batches, then check the clock.
            group = [files[i:i + batch] for i in range(pos, min(len(files), pos + batch * workers * 2), batch)]
            for ids, rows in pool.map(_measure_batch, group):
                chunk_ids += ids
                chunk_rows += rows
            pos += sum(len(g) for g in group)
            done_here = pos - start
    part = pd.DataFrame(chunk_rows, index=pd.Index(chunk_ids, name="subject_id"))
    store.write_frame(f"{tag}_{start:06d}.parquet", part)
    store.state[key] = start + done_here
    store.save_state()
    rate = done_here / max(time.monotonic() - t0, 1e-6)
    log(f"{folder}: measured {start + done_here} of {len(files)} scans ({rate:.1f}/s this turn)")
    return start + done_here >= len(files)


def imaging_table(store: Store, tag: str = "img") -> pd.DataFrame | None:
    parts = sorted(glob.glob(store.path(f"{tag}_*.parquet")))
    if not parts:
        return None
    frame = pd.concat([pd.read_parquet(p) for p in parts])
    frame = frame[~frame.index.duplicated()]
    return frame.drop(columns=[c for c in frame.columns if c == "error"])


# ----------------------------------------------------------------------------- phenotype


def load_cov(store: Store) -> pd.DataFrame:
    cov = store.read_frame("covariates.parquet")
    return cov


def task_phenotype(ctx, store: Store, clock: Clock) -> bool:
    cov = load_cov(store)
    mods = phenotype.modality_groups(store.read_frame("ecg.parquet"), store.read_frame("ct.parquet"),
                                     store.read_frame("clin.parquet"))
    img = imaging_table(store, "img")
    res = phenotype.build_phenotype(cov, mods, img)
    # Orientation: higher = more severe, i.e. more cardiac events.
    events = store.read_frame("outcomes.parquet").reindex(cov.index)["event"].to_numpy(dtype=float)
    sign = 1.0 if np.corrcoef(np.nan_to_num(res["phenotype"].to_numpy()), events)[0, 1] >= 0 else -1.0
    for key in ("phenotype", "crude", "nonimaging", "imaging_score", "group_scores"):
        res[key] = res[key] * sign
    if sign < 0 and "imaging_transform" in res["model"]:  # a release without MRI has no MRI model
        res["model"]["imaging_transform"]["beta"] = -res["model"]["imaging_transform"]["beta"]
        res["model"]["imaging_transform"]["shift"] = -res["model"]["imaging_transform"]["shift"]
    frame = pd.DataFrame({"phenotype": res["phenotype"], "crude": res["crude"], "nonimaging": res["nonimaging"],
                          "imaging_score": res["imaging_score"]})
    img2 = imaging_table(store, "img2")
    if img2 is not None and "imaging" in res["model"]:
        frame["imaging_v2"] = phenotype.score_imaging(res["model"], img2, cov).reindex(frame.index)
    store.write_frame("phenotype.parquet", frame)
    model = {k: v for k, v in res["model"].items() if k != "imaging_transform"}
    store.write_json("phenotype_model.json", model)
    # The submitted measure is severity as the participants have it: weights learned on
    # covariate-adjusted features (so that they pick out disease, not body size or age),
    # applied to the measurements themselves (risk factors that cause disease are part of
    # its severity).  Analyses use the adjusted score and adjust for covariates themselves.
    pd.DataFrame({"subject_id": frame.index, "phenotype": frame["crude"].to_numpy()}).to_csv(ctx["OUT_CSV"], index=False)
    log("phenotype written to OUT_CSV: the shared severity factor of "
        + ", ".join(f"{g} (loading {m['loading']:.2f})" for g, m in model["groups"].items())
        + (f", MRI (loading {model['imaging']['loading']:.2f}, n {model['imaging']['n']})" if "imaging" in model else ""))
    group = res["group_scores"]
    log("measurement groups' scores, correlations:\n" + group.corr().round(2).to_string())
    return True


# ----------------------------------------------------------------------------- genome scan


def task_scan(ctx, store: Store, clock: Clock) -> bool:
    proteins = store.read_array("proteins.npy", mmap=False)
    cov = load_cov(store)
    geno = ctx["load_genotypes"]()
    geno.index = geno.index.astype(str)
    rows = geno.index.get_indexer(cov.index)
    if (rows < 0).any():
        raise RuntimeError("participants without genotypes")
    G = geno.to_numpy()[rows] if not (rows == np.arange(len(rows))).all() else geno.to_numpy()
    V, p = G.shape[1], proteins.shape[1]
    if store.exists("scan_state.npz"):
        with np.load(store.path("scan_state.npz")) as z:
            state = {k: z[k] for k in z.files}
        state["next"] = int(state["next"])
    else:
        state = genetics.new_scan_state(V, p)
        state["gwas"] = np.zeros((V, len(evidence.GWAS_OUTCOMES)), dtype=np.float32)
        store.write_json("variant_ids.json", [str(c) for c in geno.columns])
    pheno = store.read_frame("phenotype.parquet")
    out = store.read_frame("outcomes.parquet")
    Y = evidence.outcome_matrix(pheno, out)
    z_hit = genetics.z_threshold(0.05 / (V * p))
    block = 512
    t_block = None
    while state["next"] < V:
        if t_block is not None and not clock.has(1.5 * t_block + 5):
            break
        s = state["next"]
        t0 = time.monotonic()
        Gb = genetics.standardise_genotypes(G[:, s:s + block])
        genetics.scan_block(Gb, proteins, s, state, z_hit)
        state["gwas"][s:s + Gb.shape[1]] = genetics.gwas(Gb, Y)
        state["next"] = s + Gb.shape[1]
        t_block = time.monotonic() - t0
    np.savez(store.path("scan_state.tmp.npz"), **state)
    os.replace(store.path("scan_state.tmp.npz"), store.path("scan_state.npz"))
    log(f"genome scan: {state['next']} of {V} variants against {p} proteins and {Y.shape[1]} outcomes")
    return state["next"] >= V


# ----------------------------------------------------------------------------- evidence and claims


def task_table(ctx, store: Store, clock: Clock) -> bool:
    analysis.build_table(ctx, store)
    log("proteome-wide evidence table computed")
    return True


def task_evidence(ctx, store: Store, clock: Clock) -> bool:
    result = analysis.analyse(ctx, store)
    experiments.plan_and_request(ctx, store, result)
    report.publish(ctx, store)
    return True


def task_experiments(ctx, store: Store, clock: Clock) -> bool:
    return experiments.follow_up(ctx, store)


def task_final(ctx, store: Store, clock: Clock) -> bool:
    experiments.finalise(ctx, store)
    report.publish(ctx, store, final=True)
    ctx["submit"]()
    return True


RUNNERS = {
    "inventory": task_inventory,
    "clinical": task_clinical,
    "imaging": lambda c, s, k: task_imaging(c, s, k, "imaging", "img"),
    "imaging_v2": lambda c, s, k: task_imaging(c, s, k, "imaging_visit2", "img2"),
    "phenotype": task_phenotype,
    "scan": task_scan,
    "table": task_table,
    "evidence": task_evidence,
    "experiments": task_experiments,
    "final": task_final,
}
# Time (seconds) a task that cannot be split needs at worst on a loaded machine at the
# largest scale: it is not started with less time left in the turn.
NEEDS = {"inventory": 5, "clinical": 60, "phenotype": 90, "table": 150, "evidence": 120, "final": 60, "experiments": 60}


def run_turn(**ctx) -> None:
    """Run the next tasks in order within this turn's time, then stop (state is kept in WORK)."""
    clock = Clock(float(ctx.get("time_limit", 300.0)))
    store = Store(ctx["WORK"])
    store.state["budget_remaining"] = ctx.get("budget_remaining")
    store.state["turns_remaining"] = ctx.get("turns_remaining")
    store.state["costs"] = ctx.get("costs")
    store.save_state()
    turns_left = ctx.get("turns_remaining")
    if turns_left is not None and int(turns_left) <= 1 and not store.done("final"):
        # The last turn: submit what the analysis supports so far.
        if store.done("evidence"):
            task_final(ctx, store, clock)
        else:
            log("[analyst] out of turns before the evidence was complete; submitting the provisional answer")
            if not os.path.exists(os.path.join(ctx["WORK"], "submission.json")):
                claims_mod.write_submission(ctx["WORK"], claims_mod.empty_claims())
            ctx["submit"]()
        store.mark("final")
        return
    for name in TASKS:
        if store.done(name):
            continue
        fresh = clock.elapsed() < 20  # a task that cannot wait for more time than a whole turn gives
        if not fresh and not clock.has(NEEDS.get(name, 10)) and name not in ("imaging", "imaging_v2", "scan"):
            log(f"[analyst] stopping before {name} ({clock.elapsed():.0f} s used); it runs next turn")
            return
        t0 = time.monotonic()
        finished = RUNNERS[name](ctx, store, clock)
        log(f"[analyst] {name}: {'done' if finished else 'in progress'} ({time.monotonic() - t0:.0f} s)")
        if not finished:
            return
        store.mark(name)
        if name == "evidence" and store.state.get("requested"):
            return  # results arrive next turn
