"""A tiny world end to end: every file of SPEC sections 5 and 6, readers that
analysts use, release/sealed separation and determinism across schedulers."""
import json
import os
import shutil
import subprocess
import time

import numpy as np
import pandas as pd
import pytest

from worlds import build_world, digest_tree, have

RELEASE_FILES = [
    "covariates.parquet", "data_dictionary.tsv", "data_dictionary.md", "proteomics.parquet",
    "transcriptomics.parquet", "metabolomics.parquet", "ecg_features.parquet", "coronary_ct.parquet",
    "mortality.parquet", "covariates_visit2.parquet", "proteomics_visit2.parquet", "targetability.parquet",
    "ehr_diagnoses.parquet", "ehr_medications.parquet", "mace_events.parquet", "genotypes.vcf.gz",
    "genotypes.vcf.gz.tbi", "genotypes.zarr", "MANIFEST.json",
]
SEALED_FILES = ["truth.json", "latent.parquet", "eval_mask.npy", "oracle.json", "world.yaml", "MANIFEST.json"]
WIDE = ["covariates", "proteomics", "transcriptomics", "metabolomics", "ecg_features", "coronary_ct", "mortality",
        "covariates_visit2", "proteomics_visit2"]
LONG = ["ehr_diagnoses", "ehr_medications", "mace_events"]


def test_every_release_and_sealed_file_exists(tiny_world_noimaging):
    rel, sealed = (os.path.join(tiny_world_noimaging, d) for d in ("release", "sealed"))
    for name in RELEASE_FILES:
        assert os.path.exists(os.path.join(rel, name)), name
    for name in SEALED_FILES:
        assert os.path.exists(os.path.join(sealed, name)), name
    assert not os.path.exists(os.path.join(tiny_world_noimaging, ".build"))


def test_tables_keys_and_columns(tiny_world_noimaging):
    rel = os.path.join(tiny_world_noimaging, "release")
    cov = pd.read_parquet(os.path.join(rel, "covariates.parquet"))
    assert list(cov.columns) == ["p31_i0", "p21003_i0", "p21001_i0", "p20116_i0", "p22040_i0", "p54_i0",
                                 "p21000_i0", "p53_i0", "imaged", "visit2"]
    assert cov.index.name == "subject_id" and cov.index.is_unique
    assert cov.index[0] == "SUBJ_00000"
    dd = pd.read_csv(os.path.join(rel, "data_dictionary.tsv"), sep="\t")
    assert list(dd.columns[:3]) == ["field_id", "description", "coding"]
    assert set(dd.field_id[dd.table == "covariates"]) == {"subject_id", *cov.columns}
    for name in WIDE:
        df = pd.read_parquet(os.path.join(rel, f"{name}.parquet"))
        assert df.index.name == "subject_id" and df.index.is_unique, name
        assert set(df.index) <= set(cov.index)
    for name in LONG:
        df = pd.read_parquet(os.path.join(rel, f"{name}.parquet"))
        assert df.columns[0] == "subject_id" and set(df.subject_id) <= set(cov.index), name
    prot = pd.read_parquet(os.path.join(rel, "proteomics.parquet"))
    tr = pd.read_parquet(os.path.join(rel, "transcriptomics.parquet"))
    assert [c.replace("PROT_", "") for c in prot.columns] == [c.replace("TRANS_", "") for c in tr.columns]
    assert prot.dtypes.unique().tolist() == [np.float32]
    tg = pd.read_parquet(os.path.join(rel, "targetability.parquet"))
    assert tg.index.name == "protein" and list(tg.index) == list(prot.columns)
    assert list(tg.columns) == ["localization", "has_pocket", "paralog_redundancy", "genetic_constraint",
                                "tissue_specificity", "tissue_restriction"]
    v2 = pd.read_parquet(os.path.join(rel, "proteomics_visit2.parquet"))
    assert set(v2.index) == set(cov.index[cov.visit2])


def test_parquet_readable_by_pyarrow_polars_duckdb(tiny_world_noimaging):
    import duckdb
    import polars as pl
    import pyarrow.parquet as pq

    rel = os.path.join(tiny_world_noimaging, "release")
    for name in WIDE + LONG + ["targetability"]:
        path = os.path.join(rel, f"{name}.parquet")
        n = pq.read_metadata(path).num_rows
        assert pl.read_parquet(path).height == n
        assert duckdb.sql(f"select count(*) from read_parquet('{path}')").fetchall()[0][0] == n


def test_sealed_truth_schema_and_mask(tiny_world_noimaging):
    import jsonschema

    sealed = os.path.join(tiny_world_noimaging, "sealed")
    truth = json.load(open(os.path.join(sealed, "truth.json")))
    schema = json.load(open(os.path.join(os.path.dirname(__file__), "..", "..", "schemas", "truth.schema.json")))
    jsonschema.validate(truth, schema)
    assert set(truth) == {"world_id", "archetype", "hard", "biases", "drivers", "surrogate", "decoys", "pairs"}
    assert len(truth["drivers"]) == 4 and {p["kind"] for p in truth["pairs"]} == {"T4", "A9"}
    assert {d["bias"] for d in truth["decoys"]} == {"T1", "T2", "T3", "T7", "T9"}
    lat = pd.read_parquet(os.path.join(sealed, "latent.parquet"))
    cov = pd.read_parquet(os.path.join(tiny_world_noimaging, "release", "covariates.parquet"))
    assert list(lat.index) == list(cov.index) and list(lat.columns) == ["latent", "latent_late"]
    mask = np.load(os.path.join(sealed, "eval_mask.npy"))
    assert mask.dtype == bool and mask.shape == (len(cov),) and 0.1 < mask.mean() < 0.3


def _release_text(release_dir):
    for root, _, files in os.walk(release_dir):
        for f in files:
            path = os.path.join(root, f)
            with open(path, "rb") as fh:
                yield path, fh.read()


def test_release_holds_no_seed_role_or_latent(tiny_world_noimaging):
    sealed = os.path.join(tiny_world_noimaging, "sealed")
    import yaml

    cfg = yaml.safe_load(open(os.path.join(sealed, "world.yaml")))
    seed = cfg["world"]["seed"]
    seed_int = int(seed, 16)
    needles = [seed.lower().encode(), seed.lower().replace("0x", "").encode(), str(seed_int).encode(),
               json.load(open(os.path.join(sealed, "oracle.json")))["oracle_key"].encode()]
    words = [b"driver", b"decoy", b"surrogate", b"latent", b"reverse_causation", b"pleiotrop", b"truth"]
    for path, data in _release_text(os.path.join(tiny_world_noimaging, "release")):
        low = data.lower()
        for nd in needles:
            assert nd not in low, f"seed material in {path}"
        if path.endswith((".json", ".md", ".tsv", ".zattrs", ".zgroup", ".zarray", ".zmetadata")):
            for w in words:
                assert w not in low, f"{w!r} in {path}"
    lat = pd.read_parquet(os.path.join(sealed, "latent.parquet"))
    rel = os.path.join(tiny_world_noimaging, "release")
    for name in WIDE:
        df = pd.read_parquet(os.path.join(rel, f"{name}.parquet")).select_dtypes("number")
        for col in df.columns:
            x = df[col].reindex(lat.index).to_numpy(float)
            ok = np.isfinite(x)
            if ok.sum() > 50 and np.nanstd(x) > 0:
                r = abs(np.corrcoef(x[ok], lat.latent.to_numpy()[ok])[0, 1])
                assert r < 0.999, f"{name}.{col} reproduces the latent"


@pytest.mark.skipif(not have("bcftools"), reason="Debian bcftools not installed")
def test_vcf_valid_for_bcftools_and_scikit_allel(tiny_world_noimaging):
    import allel

    vcf = os.path.join(tiny_world_noimaging, "release", "genotypes.vcf.gz")
    subprocess.run(["bgzip", "-t", vcf], check=True)
    body = subprocess.run(["bcftools", "view", "-H", vcf], check=True, capture_output=True, text=True).stdout
    n_var = len(body.splitlines())
    assert n_var == 1024
    stats = subprocess.run(["bcftools", "stats", vcf], check=True, capture_output=True, text=True).stdout
    assert "number of records:\t1024" in stats
    region = subprocess.run(["bcftools", "view", "-H", "-r", "2", vcf], check=True, capture_output=True, text=True).stdout
    assert region and all(line.split("\t")[0] == "2" for line in region.splitlines())
    cs = allel.read_vcf(vcf, fields=["calldata/GT", "samples", "variants/ID"])
    from pipeline.genotypes_io import load_genotypes

    dos = load_genotypes(os.path.join(tiny_world_noimaging, "release"))
    assert list(dos.index) == list(cs["samples"])
    assert list(dos.columns) == list(cs["variants/ID"])
    assert np.array_equal(cs["calldata/GT"].sum(axis=2).T, dos.to_numpy())
    assert dos.dtypes.unique().tolist() == [np.int8]


def test_determinism_across_chunking(tmp_path, tiny_world_noimaging):
    """The session's sync build against one in single-block tasks (the same bytes on a
    LocalCluster of worker processes is tests/conformance/test_conformance.py's, for every kind)."""
    reference = digest_tree(tiny_world_noimaging)
    rechunked = build_world(tmp_path / "chunk1", extra=("release=noimaging", "cluster.chunk_blocks=1"))
    assert digest_tree(rechunked) == reference


def test_manifest_lists_every_file_with_hash(tiny_world_noimaging):
    from pipeline.manifest import verify
    from pipeline.outputs import Output

    out = Output(os.path.dirname(tiny_world_noimaging), os.path.basename(tiny_world_noimaging))
    assert verify(out, out.release) == []
    assert verify(out, out.sealed) == []
    doc = json.load(open(os.path.join(out.release, "MANIFEST.json")))
    assert doc["scale"] == "tiny" and "seed" not in json.dumps(doc).lower()


def test_imaging_zarr_layout_and_paper_compat_follow_up(tmp_path):
    """release=zarr writes the same pixels as the npz layout into one store; with
    paper_compat the follow-up scans of a non-DCM world are rendered with DCM
    morphology again (the original defect), and by default they are not.

    Two builds serve both points: the default npz build, and a zarr build with
    paper_compat, which changes only the follow-up scans, so their baseline scans
    must be the same pixels.  Every imaged participant who is alive at visit 2
    attends it (visit2_fraction=1), so 150 imaged give about as many follow-up scans
    for the wall-thickness correlation as 600 imaged at the default 20 %, with a
    quarter of the baseline scans to render."""
    import zarr

    from pipeline.imaging.measure import measure_subjects

    extra = ("world.seed=0x" + "5a" * 16, "scale.imaged=150", "world.visit2_fraction=1.0")
    npz = build_world(tmp_path / "n", world="heldout-hcm-01", extra=extra)
    compat = build_world(tmp_path / "c", world="heldout-hcm-01", extra=(*extra, "release=zarr", "paper_compat=true"))
    group = zarr.open_group(os.path.join(compat, "release", "imaging.zarr"), mode="r")
    ids = [str(x) for x in np.asarray(group["subject_id"][:]).tolist()]
    cov = pd.read_parquet(os.path.join(compat, "release", "covariates.parquet"))
    assert set(ids) == set(cov.index[cov.imaged]) and group["cine"].shape == (len(ids), 3, 25, 128, 128)
    assert group["cine"].dtype == np.uint8 and group["t1map"].dtype == np.float32
    assert not os.path.exists(os.path.join(compat, "release", "imaging"))
    for i in (0, len(ids) - 1):
        with np.load(os.path.join(npz, "release", "imaging", f"{ids[i]}.npz")) as z:
            assert np.array_equal(z["cine"], np.asarray(group["cine"][i]))
            assert np.array_equal(z["t1map"], np.asarray(group["t1map"][i]), equal_nan=True)
    lat = pd.read_parquet(os.path.join(npz, "sealed", "latent.parquet"))
    files = sorted(os.listdir(os.path.join(npz, "release", "imaging_visit2")))
    own_ids = [f[:-4] for f in files]
    cine = np.stack([np.load(os.path.join(npz, "release", "imaging_visit2", f))["cine"] for f in files])
    t1 = np.stack([np.load(os.path.join(npz, "release", "imaging_visit2", f))["t1map"] for f in files])
    v2 = zarr.open_group(os.path.join(compat, "release", "imaging_visit2.zarr"), mode="r")
    assert [str(x) for x in np.asarray(v2["subject_id"][:]).tolist()] == own_ids
    assert len(own_ids) >= 100, len(own_ids)
    walls = {}
    for name, (c, t) in (("own", (cine, t1)), ("dcm", (np.asarray(v2["cine"][:]), np.asarray(v2["t1map"][:])))):
        feats = measure_subjects(c, t)
        walls[name] = np.corrcoef(feats["wall_thickness_px"], lat.loc[own_ids, "latent_late"].to_numpy())[0, 1]
    shutil.rmtree(tmp_path)
    # HCM thickens the wall with disease (+0.55); DCM thins it (-0.28)
    assert walls["own"] > 0.2 and walls["dcm"] < walls["own"] - 0.3, walls


# ----------------------------------------------------------------------------- reproducible manifests, build record


def test_manifest_has_no_clock_time_unless_source_date_epoch(tiny_world_noimaging, monkeypatch):
    """Two clean builds are compared file by file (manifests included) in the
    determinism test; here: the manifest on disk is exactly what the manifest
    builder gives without a clock, and SOURCE_DATE_EPOCH adds that time."""
    from pipeline.manifest import MANIFEST, build_manifest
    from pipeline.outputs import Output

    out = Output(os.path.dirname(tiny_world_noimaging), os.path.basename(tiny_world_noimaging))
    on_disk = json.load(open(os.path.join(out.release, MANIFEST)))
    assert "created" not in on_disk
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    again = build_manifest(out, out.release, extra={"bundle": "release", "scale": "tiny"})
    assert again == on_disk
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    dated = build_manifest(out, out.release, extra={"bundle": "release", "scale": "tiny"})
    assert dated.pop("created") == "2023-11-14T22:13:20+00:00" and dated == on_disk


def test_build_record_beside_the_bundle(tiny_world_noimaging):
    import hashlib

    import yaml

    path = os.path.join(tiny_world_noimaging, "build-record.json")
    text = open(path).read()
    rec = json.loads(text)
    for bundle in ("release", "sealed"):
        for root, _, files in os.walk(os.path.join(tiny_world_noimaging, bundle)):
            assert "build-record.json" not in files
    manifest = open(os.path.join(tiny_world_noimaging, "release", "MANIFEST.json"), "rb").read()
    assert rec["release_manifest_sha256"] == hashlib.sha256(manifest).hexdigest()
    assert rec["world_id"] == "all-biases" and rec["scale"] == "tiny" and rec["cluster"]["workers"] == 1
    assert rec["versions"]["numpy"] == np.__version__ and rec["versions"]["drugtargetworld"]
    names = [s["name"] for s in rec["stages"]]
    assert names[0] == "sample" and names[-1] == "manifest" and "molecules" in names
    assert all(s["wall_s"] >= 0 and s["cpu_s"] >= 0 for s in rec["stages"])
    assert sum(s["bytes"] for s in rec["stages"] if s["name"] != "manifest") >= rec["bytes"]
    assert sum(s["tasks"] for s in rec["stages"]) > 0 and "molecules" in rec["task_stages"]
    seed = yaml.safe_load(open(os.path.join(tiny_world_noimaging, "sealed", "world.yaml")))["world"]["seed"]
    for needle in (seed.lower(), seed.lower()[2:], str(int(seed, 16))):
        assert needle not in text.lower(), "the build record holds the seed"


def test_config_digest_ignores_the_seed_and_where_it_runs():
    from pipeline import config
    from pipeline.buildrecord import config_digest

    base = config_digest(config.load(["world=standard-01"]).cfg)
    assert base == config_digest(config.load(["world=standard-01", "world.seed=0x" + "77" * 16, "cluster=sync",
                                              "out=/elsewhere"]).cfg)
    assert base != config_digest(config.load(["world=standard-01", "scale.imaged=200"]).cfg)


# ----------------------------------------------------------------------------- progress and dashboard


class _Stream:
    def __init__(self, tty: bool):
        self.tty, self.text = tty, []

    def isatty(self):
        return self.tty

    def write(self, s):
        self.text.append(s)

    def flush(self):
        pass


class _Done:
    def done(self):
        return True


def test_progress_plain_lines_off_a_terminal_and_one_live_line_on_one():
    from pipeline.graph.progress import Progress

    import re

    size = [0]
    plain = _Stream(tty=False)
    p = Progress("w", stream=plain, size_fn=lambda: size[0])
    p.start("molecules")
    for _ in range(3):
        p.track(_Done())
    size[0] = 3_000_000
    p.start("vcf")
    p.stop()
    lines = "".join(plain.text).splitlines()
    assert lines[0] == "[w] molecules ..." and "\r" not in "".join(plain.text)
    assert re.fullmatch(r"\[w\] molecules done in \d+\.\ds: 3/3 tasks, 3\.0 MB written \([\d,.]+ MB/s\)", lines[1]), lines[1]
    assert lines[2] == "[w] vcf ..." and re.fullmatch(r"\[w\] vcf done in \d+\.\ds", lines[3]), lines
    assert p.records["molecules"]["tasks"] == 3 and p.records["molecules"]["bytes"] == 3_000_000
    assert set(p.stages) == {"molecules", "vcf"}

    tty = _Stream(tty=True)
    p = Progress("w", stream=tty, size_fn=lambda: 0, interval=0.01)
    p.start("imaging")
    p.track(_Done())
    time.sleep(0.1)
    p.stop()
    text = "".join(tty.text)
    assert text.count("\n") == 1 and text.endswith("1/1 tasks\x1b[K\n") and text.count("\r") >= 2
    assert "[w] imaging 0s: 1/1 tasks" in text  # the live line, rewritten in place


def test_dashboard_link_is_printed_and_serves(capsys):
    """bokeh imports with the pins, so distributed serves the dashboard."""
    import urllib.request

    import bokeh
    assert bokeh.__version__
    from omegaconf import OmegaConf

    from pipeline import config
    from pipeline.graph.executor import make_executor

    cfg = OmegaConf.structured(config.ClusterConfig(n_workers=1, dashboard_address="127.0.0.1:0"))
    ex = make_executor(cfg, processes=False)
    try:
        err = capsys.readouterr().err
        link = err.split("dashboard ")[1].split()[0]
        assert link.startswith("http://127.0.0.1:") and link.endswith("/status"), err
        with urllib.request.urlopen(link, timeout=30) as resp:
            assert resp.status == 200 and b"Dask" in resp.read()
    finally:
        ex.close()


# ----------------------------------------------------------------------------- the command line as a Hydra app


def _cli(args, cwd, timeout=300, env=None):
    import sys

    return subprocess.run([sys.executable, "-m", "pipeline.build", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.mark.parametrize("args,expect", [
    (["--help"], ["pipeline.build: build one world", "world: all-biases", "-m world=standard-01,standard-02"]),
    (["--cfg", "job", "world=null-01", "scale=small"], ["id: null-01", "participants: 6000", "out: ./worlds"]),
    (["--info", "defaults", "world=null-01"], ["world/null-01", "scale/tiny"]),
    (["--shell-completion", "install=bash"], ["hydra_bash_completion"]),
    (["--version"], ["Hydra 1.3"]),
])
def test_hydra_flags(args, expect, tmp_path, monkeypatch, capsys):
    """In process (the real command is run by the next test and the wheel tests)."""
    import logging

    from pipeline.build import main

    monkeypatch.chdir(tmp_path)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    assert main(args) == 0
    assert (root.handlers, root.level) == (handlers, level), "the app left the caller's logging changed"
    out = capsys.readouterr().out
    for text in expect:
        assert text in out, (text, out[:2000])
    assert os.listdir(tmp_path) == [], "a Hydra flag wrote into the working folder"


def test_help_and_completion_query_as_commands(tmp_path):
    proc = _cli(["--help"], tmp_path)
    assert proc.returncode == 0 and "Config groups" in proc.stdout, proc.stderr
    env = dict(os.environ, COMP_LINE="dtw-build world=standard-0", COMP_POINT="26")
    proc = _cli(["--shell-completion", "query=bash"], tmp_path, env=env)
    assert proc.returncode == 0 and proc.stdout.split() == [f"world=standard-0{i}" for i in range(1, 6)], proc.stdout
    assert os.listdir(tmp_path) == []


def test_multirun_builds_each_world_on_one_cluster(tmp_path):
    """-m world=a,b: one build per world in this process on one local cluster,
    with nothing written to the working folder or beside the worlds."""
    cwd, out = tmp_path / "cwd", tmp_path / "out"
    cwd.mkdir()
    small = ["scale.participants=400", "scale.imaged=80", "scale.proteins=60", "scale.variants=128", "release=noimaging"]
    proc = _cli(["-m", "world=standard-02,null-01", *small, "cluster=local", "cluster.n_workers=1",
                 "cluster.dashboard_address=127.0.0.1:0", f"out={out}"], cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("dask: local cluster of 1 worker") == 1, proc.stderr
    assert sorted(os.listdir(out)) == ["null-01", "standard-02"]
    for w in ("null-01", "standard-02"):
        assert sorted(os.listdir(out / w)) == ["build-record.json", "release", "sealed"]
        assert (out / w / "release" / "MANIFEST.json").exists()
        assert f"built {w}: " in proc.stderr
    assert os.listdir(cwd) == []
