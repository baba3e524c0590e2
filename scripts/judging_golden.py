"""Golden outputs of the judging side (scorer, leak audit, oracle, release loader), to prove
a restructuring of it changes no byte of what it says.

    python scripts/judging_golden.py record  DIR    # builds the worlds once, writes DIR/golden/
    python scripts/judging_golden.py compare DIR    # recomputes into DIR/now/ and compares byte for byte

Worlds (tiny, no pixels, built once into DIR/worlds/): all-biases, the same world with its
roles re-dealt (``world.roles_salt``, for ``--against``), null-01, and all-biases with 16
imaged participants (pixels, the phenotype baseline and the images' audit paths).  The
submissions are written here from each world's truth so that every S2 path fires: the
empty and unparseable submission, the observational and experimental optimum, the swap,
abstention by entry and by nomination, the safety penalty, the 25-nomination cap, invalid
and repeated identifiers and labels, the null world's restraint, and phenotypes on every
branch (baseline, fallback, duplicate IDs, too few values, zero variance, an index column).
The pure ``score`` is also run on a malformed truth and without a protein list.

What varies between runs is normalised before the comparison: the audit's ``seconds``.
Exit status 1 when anything differs, with the first differing line of each file.
"""
from __future__ import annotations

import contextlib
import difflib
import io
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SALT = "golden-salt-1"
WORLDS = {
    "all-biases": ("world=all-biases", "release=noimaging"),
    "salted": ("world=all-biases", "release=noimaging", f"world.roles_salt={SALT}"),
    "null-01": ("world=null-01", "release=noimaging"),
    "imaged": ("world=all-biases", "scale.imaged=16"),
}


def build_worlds(root: str) -> dict:
    from pipeline import config
    from pipeline.build import build

    out = {}
    for name, overrides in WORLDS.items():
        dest = os.path.join(root, "worlds", name)
        world_id = overrides[0].split("=", 1)[1]
        out[name] = os.path.join(dest, world_id)
        if os.path.exists(os.path.join(out[name], "release", "MANIFEST.json")):
            continue
        resolved = config.load([*overrides, "scale=tiny", f"out={dest}", "cluster=sync", "cluster.progress=false"])
        build(resolved, progress=False)
    return out


# ----------------------------------------------------------------------------- submissions


def _truth(world: str) -> dict:
    with open(os.path.join(world, "sealed", "truth.json")) as fh:
        return json.load(fh)


def submissions(truth: dict) -> dict:
    """name -> (submission text or None, ledger rows or None, experiments-folder payloads)."""
    drivers = [d["protein"] for d in truth["drivers"]]
    directions = {d["protein"]: d["direction"] for d in truth["drivers"]}
    mech = {"T1": "confounding", "T2": "reverse_causation", "T3": "selection", "T7": "pleiotropy",
            "T9": "measurement_artifact"}
    rejections = [{"molecule": d["protein"], "mechanism": mech.get(d["bias"], d["bias"]), "reason": "x"}
                  for d in truth["decoys"]]
    pairs = truth["pairs"]
    partners = [p["partner"] for p in pairs]
    surrogate = truth["surrogate"]
    out = {}
    out["absent"] = (None, None, {})
    out["unparseable"] = ('{"nominated": ["PROT_0001"', None, {})
    out["not_an_object"] = ("[1, 2, 3]", None, {})
    observational = {
        "nominated": [{"protein": p, "rank": i + 1} for i, p in enumerate(drivers)],
        "directions": directions, "rejected": rejections,
        "abstentions": [{"molecules": [p["causal"], p["partner"]]} for p in pairs],
        "outcome_alignment": {surrogate: "misaligned"} if surrogate else {}, "confidence": 0.7,
    }
    out["observational"] = (json.dumps(observational), None, {})
    experimental = dict(observational, abstentions=[])
    ledger = [{"turn": 1, "kind": "knockdown", "protein": p["causal"], "status": "delivered", "cost": 400000}
              for p in pairs]
    ledger.append({"turn": 2, "kind": "knockdown", "protein": "PROT_0001", "status": "refused", "cost": 0})
    out["experimental_ledger"] = (json.dumps(experimental), ledger, {})
    folder = {f"{p['causal']}.knockdown.json": {"action": "knockdown", "status": "ok", "protein": p["causal"]}
              for p in pairs}
    folder["junk.json"] = {"status": "refused"}
    out["experimental_folder"] = (json.dumps(experimental), None, folder)
    unpaired = [p for p in drivers if p not in {q["causal"] for q in pairs}]
    out["swap"] = (json.dumps({"nominated": unpaired + partners, "directions": directions}), None, {})
    both = [m for p in pairs for m in (p["causal"], p["partner"])]
    out["both_members"] = (json.dumps({"nominated": unpaired + both, "rejected": rejections[:1]}), None, {})
    out["penalty"] = (json.dumps({"nominated": drivers + ([surrogate] if surrogate else []),
                                  "outcome_alignment": {surrogate: "ALIGNED "} if surrogate else {}}), None, {})
    many = [f"PROT_{i:04d}" for i in range(200, 240)] + drivers + ["PROT_0200", "nope", 17, None, {"protein": 3}]
    out["cap_and_invalid"] = (json.dumps({
        "nominated": many + [{"protein": drivers[0] if drivers else "PROT_0300", "rank": 0.5}],
        "directions": {**{p: "up" for p in drivers}, "PROT_0200": "inhibit", "x": 5},
        "outcome_alignment": "aligned",
        "rejected": rejections + [{"molecule": "bad id"}, {"molecule": "PROT_0210", "mechanism": "luck"}]
        + rejections[:1],
        "abstentions": [{"molecules": ["PROT_0001"]}, {"molecules": [f"PROT_{i:04d}" for i in range(6)]},
                        {"molecules": ["PROT_0001", "PROT_0002"]}, {"molecules": ["PROT_0002", "PROT_0001"]},
                        {"molecules": "PROT_0001"}, 7],
        "confidence": 7,
    }), None, {})
    out["partner_elsewhere"] = (json.dumps({"nominated": unpaired + partners, "rejected": [
        {"molecule": p["causal"], "mechanism": "confounding"} for p in pairs]}), None, {})
    out["abstain_entries"] = (json.dumps({"abstentions": [{"molecules": [p["causal"], p["partner"]]} for p in pairs]
                                          + [{"molecules": ["PROT_0001", "PROT_0002", "PROT_0003"]}]}), None, {})
    out["labels_only"] = (json.dumps({"directions": directions, "confidence": "high", "rejected": {}}), None, {})
    out["rejections_only"] = (json.dumps({"rejected": rejections}), None, {})
    out["one_wrong_nomination"] = (json.dumps({"nominated": ["PROT_0123"], "rejected": rejections[:1]}), None, {})
    return out


def phenotypes(world: str) -> dict:
    """name -> CSV bytes (or None: no file)."""
    import pyarrow.parquet as pq

    latent = pq.read_table(os.path.join(world, "sealed", "latent.parquet")).to_pandas()["latent"]
    ids = [str(s) for s in latent.index]
    rng = np.random.default_rng(5)
    noisy = latent.to_numpy() + rng.standard_normal(len(latent)) * 0.8

    def csv(frame: pd.DataFrame, index: bool = False) -> bytes:
        return frame.to_csv(index=index).encode()

    return {
        "none": None,
        "latent": csv(pd.DataFrame({"subject_id": ids, "phenotype": latent.to_numpy()})),
        "noisy_two_columns": csv(pd.DataFrame({"subject_id": ids, "a": -3 * noisy + 1, "b": noisy})),
        "with_index": csv(pd.DataFrame({"severity": noisy}, index=pd.Index(ids, name=""))),
        "duplicates": csv(pd.DataFrame({"subject_id": ids[:10] + ids[:10], "phenotype": np.arange(20.0)})),
        "too_few": csv(pd.DataFrame({"subject_id": ids[:40], "phenotype": np.arange(40.0)})),
        "constant": csv(pd.DataFrame({"subject_id": ids, "phenotype": 1.0})),
        "text": b"subject_id,phenotype\nSUBJ_00000,abc\n,1\n" + b"garbage\xff\n",
    }


def _write_work(work: str, text, folder: dict, phenotype) -> None:
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    if text is not None:
        with open(os.path.join(work, "submission.json"), "w") as fh:
            fh.write(text)
    if folder:
        os.makedirs(os.path.join(work, "experiments"))
        for name, payload in folder.items():
            with open(os.path.join(work, "experiments", name), "w") as fh:
                json.dump(payload, fh)
    if phenotype is not None:
        with open(os.path.join(work, "phenotype.csv"), "wb") as fh:
            fh.write(phenotype)


def _dump(obj) -> str:
    return json.dumps(obj, indent=1, sort_keys=False, allow_nan=True) + "\n"


def score_outputs(worlds: dict, scratch: str) -> dict:
    from pipeline.score import score, score_episode

    out = {}
    for name in ("all-biases", "null-01", "imaged"):
        world = worlds[name]
        sealed = os.path.join(world, "sealed")
        phen = phenotypes(world)
        subs = submissions(_truth(world))
        work = os.path.join(scratch, "work")
        for sub_name, (text, ledger, folder) in subs.items():
            # every submission once with the noisy phenotype; the phenotype variants on two submissions
            choices = list(phen) if sub_name in ("absent", "observational") else ["noisy_two_columns"]
            for ph in choices:
                _write_work(work, text, folder, phen[ph])
                ledger_path = None
                if ledger is not None:
                    ledger_path = os.path.join(scratch, "ledger.jsonl")
                    with open(ledger_path, "w") as fh:
                        fh.write("\n".join(json.dumps(r) for r in ledger) + "\n{broken\n")
                out[f"score/{name}/{sub_name}/{ph}.json"] = _dump(score_episode(sealed, work, ledger_path))
        # the command line, once per world
        _write_work(work, subs["observational"][0], {}, phen["latent"])
        done = subprocess.run([sys.executable, "-m", "pipeline.score", "--sealed", sealed, "--work", work],
                              capture_output=True, text=True, cwd=REPO)
        out[f"score/{name}/cli.txt"] = f"exit {done.returncode}\n{done.stdout}\n--stderr--\n{done.stderr}"
    # the pure core on a malformed truth and without the world's protein list
    truth = _truth(worlds["all-biases"])
    sub = json.loads(submissions(truth)["cap_and_invalid"][0])
    out["score/pure/no_protein_list.json"] = _dump(score(truth, sub, None, None, None, None, None, None))
    bad_truth = {"drivers": [{"protein": "PROT_0001", "direction": "up"}, "x", {"protein": "PROT_0001"}],
                 "decoys": [{"protein": "PROT_0002", "mechanism": "selection"}, {"protein": "PROT_0003", "bias": "T5"}],
                 "pairs": [None, {"causal": "PROT_0001", "partner": "PROT_0004", "kind": "T5"},
                           {"causal": "PROT_0009", "partner": "PROT_0004"}], "surrogate": 12, "world_id": 3}
    out["score/pure/malformed_truth.json"] = _dump(score(bad_truth, sub, None, None, None, 0.9, [], {"PROT_0001"}))
    import pyarrow.parquet as pq

    sealed = os.path.join(worlds["all-biases"], "sealed")
    latent = pq.read_table(os.path.join(sealed, "latent.parquet")).to_pandas()["latent"]
    mask = np.load(os.path.join(sealed, "eval_mask.npy"))
    phen = pd.DataFrame({"subject_id": [str(i) for i in latent.index], "p": latent.to_numpy() * 2 + 1})
    observational = json.loads(submissions(truth)["observational"][0])
    for name, variant in (("pair_free", dict(truth, pairs=[])), ("no_decoys", dict(truth, decoys=[])),
                          ("only_pair_drivers", dict(truth, drivers=[d for d in truth["drivers"]
                                                                     if d["protein"] in {p["causal"] for p in truth["pairs"]}]))):
        for sub_name, sub_value in (("observational", observational), ("empty", {})):
            for b in (0.9, 0.3, float("nan")):
                result = score(variant, sub_value, phen, latent, mask, b, [], None)
                out[f"score/pure/{name}_{sub_name}_{b}.json"] = _dump(result)
    out["score/pure/not_a_truth.json"] = _dump(score([], None, None, None, None, "x", "y", None))
    # error paths of the file reader
    missing = subprocess.run([sys.executable, "-m", "pipeline.score", "--sealed", os.path.join(scratch, "nope"),
                              "--work", work], capture_output=True, text=True, cwd=REPO)
    out["score/cli_missing_sealed.txt"] = f"exit {missing.returncode}\n{missing.stdout}\n--stderr--\n" + \
        missing.stderr.replace(scratch, "<scratch>")
    return out


def _normalise_audit(text: str) -> str:
    text = re.sub(r'"seconds": [0-9.]+', '"seconds": 0', text)
    return re.sub(r"(PASSED|FAILED) in [0-9.]+s", r"\1 in 0s", text)


def audit_outputs(worlds: dict, scratch: str) -> dict:
    from pipeline.audit import audit, compare_missingness, compare_nondata, format_table

    out = {}
    for name in ("all-biases", "null-01", "imaged"):
        report = audit(worlds[name])
        out[f"audit/{name}.json"] = _normalise_audit(_dump(report))
        out[f"audit/{name}.txt"] = _normalise_audit(format_table(report))
    report = audit(worlds["all-biases"], against=worlds["salted"])
    out["audit/against.json"] = _normalise_audit(_dump(report))
    # a pair that is not a role shuffle, and planted differences the comparison must see
    out["audit/against_null.json"] = _normalise_audit(_dump(audit(worlds["all-biases"], against=worlds["null-01"],
                                                                  only=[])))
    planted = os.path.join(scratch, "planted", "all-biases")
    shutil.rmtree(os.path.dirname(planted), ignore_errors=True)
    shutil.copytree(worlds["salted"], planted)
    with open(os.path.join(planted, "release", "data_dictionary.md"), "a") as fh:
        fh.write("\nselected drivers: T4\n")
    os.remove(os.path.join(planted, "release", "genotypes.vcf.gz.tbi"))
    cov = pd.read_parquet(os.path.join(planted, "release", "proteomics.parquet"))
    cov.iloc[:50, 3] = np.nan
    cov.to_parquet(os.path.join(planted, "release", "proteomics.parquet"))
    ra, rb = os.path.join(worlds["all-biases"], "release"), os.path.join(planted, "release")
    out["audit/compare_nondata_planted.json"] = _dump(compare_nondata(ra, rb))
    out["audit/compare_missingness_planted.json"] = _dump(compare_missingness(ra, rb))
    out["audit/planted.json"] = _normalise_audit(_dump(audit(planted)))
    os.remove(os.path.join(planted, "sealed", "truth.json"))
    out["audit/planted_no_truth.json"] = _normalise_audit(_dump(audit(planted, only=["role_words"])))
    for args, key in (([worlds["all-biases"], "--against", worlds["salted"]], "cli_against"),
                      ([worlds["null-01"], "--json"], "cli_json"), ([os.path.join(scratch, "nowhere")], "cli_missing")):
        done = subprocess.run([sys.executable, "-m", "pipeline.audit", *args], capture_output=True, text=True, cwd=REPO)
        out[f"audit/{key}.txt"] = _normalise_audit(f"exit {done.returncode}\n{done.stdout}\n--stderr--\n{done.stderr}")
    return out


def oracle_outputs(worlds: dict, scratch: str) -> dict:
    from pipeline.oracle import Ledger, OracleError, load_oracle, read_ledger, run_experiment

    out = {}
    for name in ("all-biases", "imaged"):
        sealed = os.path.join(worlds[name], "sealed")
        spec = load_oracle(sealed)
        proteins = [d.protein for d in spec.drivers] + [spec.surrogate, spec.proteins[0], "PROT_9999", 5]
        results = [run_experiment(spec, kind, p) for kind in ("knockdown", "cell_perturbation", "bogus")
                   for p in proteins]
        results += [run_experiment(spec, "cell_perturbation", proteins[0], paper_compat=True, realism=True)]
        out[f"oracle/{name}.json"] = _dump(results)
        path = os.path.join(scratch, "ledger.jsonl")
        if os.path.exists(path):
            os.remove(path)
        ledger = Ledger(900000, path, sealed)
        payloads = [ledger.request("knockdown", p, turn=i) for i, p in enumerate(proteins)]
        out[f"oracle/{name}_ledger.json"] = _dump({"payloads": payloads, "rows": read_ledger(path),
                                                  "spent": ledger.spent})
    errors = []
    for content in (None, "not json", json.dumps({"format_version": "2"}), json.dumps({"world_id": "x"})):
        folder = os.path.join(scratch, "oracle_err")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        if content is not None:
            with open(os.path.join(folder, "oracle.json"), "w") as fh:
                fh.write(content)
        try:
            load_oracle(folder)
            errors.append("loaded")
        except OracleError as exc:
            errors.append(str(exc).replace(scratch, "<scratch>"))
    out["oracle/errors.json"] = _dump(errors)
    done = subprocess.run([sys.executable, "-m", "pipeline.experiment", "--sealed",
                           os.path.join(worlds["all-biases"], "sealed"), "--kind", "knockdown", "--protein",
                           "PROT_0010"], capture_output=True, text=True, cwd=REPO)
    out["oracle/cli.txt"] = f"exit {done.returncode}\n{done.stdout}\n--stderr--\n{done.stderr}"
    return out


def release_outputs(worlds: dict, scratch: str) -> dict:
    from pipeline import release

    out = {}
    for name in ("all-biases", "imaged"):
        done = subprocess.run([sys.executable, "-m", "pipeline.release", worlds[name], "--psam",
                               os.path.join(scratch, "g.psam")], capture_output=True, text=True, cwd=REPO)
        with open(os.path.join(scratch, "g.psam")) as fh:
            psam = fh.read()
        out[f"release/{name}_cli.txt"] = (f"exit {done.returncode}\n{done.stdout}\n--stderr--\n{done.stderr}\n"
                                          f"{psam}").replace(worlds[name], "<world>")
        rel = release.open(worlds[name])
        lines = [repr(rel.tables), repr(rel.files[:5]), rel.format_version,
                 repr(rel.table("covariates").dtypes.to_dict()), repr(rel.dictionary.shape),
                 repr(rel.genotypes().shape)]
        for visit in (0, 2):
            imgs = rel.images(visit)
            lines.append(f"visit {visit}: {len(imgs)}")
            for sid in list(imgs)[:1]:
                img = imgs[sid]
                lines.append(f"{sid} {img.cine.shape} {img.t1map.dtype} {img.geometry}")
        out[f"release/{name}_api.txt"] = "\n".join(lines) + "\n"
    errors = []
    broken = os.path.join(scratch, "broken")
    shutil.rmtree(broken, ignore_errors=True)
    shutil.copytree(os.path.join(worlds["null-01"], "release"), os.path.join(broken, "release"))
    manifest = os.path.join(broken, "release", "MANIFEST.json")
    with open(manifest) as fh:
        doc = json.load(fh)
    for step in ("sha", "sizes", "version", "absent", "nowhere"):
        if step == "sha":
            with open(os.path.join(broken, "release", "targetability.parquet"), "r+b") as fh:
                fh.seek(100)
                fh.write(b"\x00\x01")
        if step == "sizes":
            with open(os.path.join(broken, "release", "mortality.parquet"), "ab") as fh:
                fh.write(b"x")
        if step == "version":
            with open(manifest, "w") as fh:
                json.dump(dict(doc, format_version="99"), fh)
        if step == "absent":
            os.remove(manifest)
        target = broken if step != "nowhere" else os.path.join(broken, "nowhere")
        for verify in (True, "sizes"):
            try:
                release.open(target, verify=verify)
                errors.append("opened")
            except release.ReleaseError as exc:
                errors.append(str(exc).replace(scratch, "<scratch>"))
    out["release/errors.json"] = _dump(errors)
    return out


def collect(root: str, dest: str) -> None:
    worlds = build_worlds(root)
    scratch = os.path.join(root, "scratch")
    os.makedirs(scratch, exist_ok=True)
    outputs = {}
    with contextlib.redirect_stderr(io.StringIO()):
        for part in (score_outputs, audit_outputs, oracle_outputs, release_outputs):
            outputs.update(part(worlds, scratch))
    shutil.rmtree(dest, ignore_errors=True)
    for rel, text in outputs.items():
        path = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text.replace(root, "<root>"))
    print(f"{len(outputs)} outputs written to {dest}")


def compare(golden: str, now: str) -> int:
    def files(base):
        return sorted(os.path.relpath(os.path.join(r, f), base) for r, _, fs in os.walk(base) for f in fs)

    a, b = files(golden), files(now)
    problems = [f"only in golden: {p}" for p in sorted(set(a) - set(b))]
    problems += [f"only now: {p}" for p in sorted(set(b) - set(a))]
    for rel in sorted(set(a) & set(b)):
        with open(os.path.join(golden, rel), "rb") as fa, open(os.path.join(now, rel), "rb") as fb:
            da, db = fa.read(), fb.read()
        if da != db:
            diff = list(difflib.unified_diff(da.decode(errors="replace").splitlines(),
                                             db.decode(errors="replace").splitlines(), lineterm="", n=0))
            problems.append(f"{rel} differs:\n    " + "\n    ".join(diff[2:12]))
    for p in problems:
        print(p)
    print(f"{len(a)} golden outputs, {len(problems)} difference(s)")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] not in ("record", "compare"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1])
    if argv[0] == "record":
        collect(root, os.path.join(root, "golden"))
        return 0
    collect(root, os.path.join(root, "now"))
    return compare(os.path.join(root, "golden"), os.path.join(root, "now"))


if __name__ == "__main__":
    sys.path.insert(0, REPO)
    sys.exit(main())
