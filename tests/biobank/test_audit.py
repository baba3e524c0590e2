"""Leak audit (pipeline.audit): it passes on tiny worlds, role-shuffled twins agree
on every non-data byte, and every check fails on a planted leak of its kind."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from worlds import build_world
from pipeline import audit as A
from pipeline.writers.parquet import table_bytes

HELDOUT_SEEDS = {"heldout-hcm-02": "0xf3a1c2d4e5b60718293a4b5c6d7e8f90"}
SALT = "audit-salt-1"


@pytest.fixture(scope="module")
def salted(tiny_built):
    """all-biases, no imaging, with the roles re-dealt over identifiers."""
    return tiny_built("all-biases", f"world.roles_salt={SALT}")


@pytest.fixture(scope="module")
def seed_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("seeds") / "seeds.yaml"
    path.write_text(yaml.safe_dump(HELDOUT_SEEDS))
    return str(path)


@pytest.fixture(scope="module")
def imaging_pair(tmp_path_factory):
    """all-biases with a few imaged participants, twice with different role deals;
    T3 selects on L, so who is imaged differs between the two.  In this process: on
    the shared cluster both workers would first have to load the MRI kernels, which
    costs more than rendering 16 participants."""
    extra = ("scale.imaged=16",)
    a = build_world(tmp_path_factory.mktemp("img_a"), extra=extra)
    b = build_world(tmp_path_factory.mktemp("img_b"), extra=extra + (f"world.roles_salt={SALT}",))
    return a, b


def _failed(report: dict) -> dict:
    return {f["name"]: f for f in report["findings"] if not f["passed"]}


def _finding(report: dict, name: str) -> dict:
    return next(f for f in report["findings"] if f["name"] == name)


def _copy(world: str, tmp_path) -> str:
    dest = os.path.join(str(tmp_path), os.path.basename(world))
    shutil.copytree(world, dest)
    return dest


def _truth(world: str) -> dict:
    return json.load(open(os.path.join(world, "sealed", "truth.json")))


def _seed(world: str) -> int:
    return int(yaml.safe_load(open(os.path.join(world, "sealed", "world.yaml")))["seed_int"])


def _rewrite_parquet(path: str, table) -> None:
    with open(path, "wb") as fh:
        fh.write(table_bytes(table))


def _add_kv(path: str, key: bytes, value: bytes) -> None:
    table = pq.read_table(path)
    _rewrite_parquet(path, table.replace_schema_metadata({**(table.schema.metadata or {}), key: value}))


# ----------------------------------------------------------------------------- passing worlds


WORLDS = ["all-biases", "null-01", "hard-messy-01", "heldout-hcm-02"]
FINDINGS = ["sealed_inputs", *A.CHECKS]


@pytest.fixture(scope="module")
def report_of(tiny_built, seed_file):
    """The audit report of each tiny world (built once per session), audited once per module."""
    reports = {}

    def get(world):
        if world not in reports:
            extra = (f"seeds={seed_file}",) if world.startswith("heldout") else ()
            reports[world] = A.audit(tiny_built(world, *extra))
        return reports[world]

    return get


@pytest.mark.parametrize("finding", FINDINGS)
@pytest.mark.parametrize("world", WORLDS)
def test_audit_finding_passes_on_tiny_world(world, finding, report_of):
    report = report_of(world)
    f = _finding(report, finding)
    assert f["passed"], json.dumps(f, indent=1)
    assert report["seconds"] < 30
    assert {e["path"] for e in report["files"]} >= {"proteomics.parquet", "genotypes.vcf.gz", "MANIFEST.json"}


def test_role_shuffle_invariance(tiny_world_noimaging, salted):
    assert _truth(tiny_world_noimaging)["drivers"] != _truth(salted)["drivers"]
    assert A.compare_nondata(os.path.join(tiny_world_noimaging, "release"), os.path.join(salted, "release")) == []
    report = A.audit(tiny_world_noimaging, against=salted, only=[])
    for name in ("role_shuffle_pair", "role_shuffle_invariance", "missingness_invariance", "targetability_invariance"):
        f = _finding(report, name)
        assert f["passed"], f


def test_role_shuffle_invariance_with_imaging(imaging_pair):
    a, b = imaging_pair
    imaged = [set(pd.read_parquet(os.path.join(w, "release", "covariates.parquet"), columns=["imaged"]).query("imaged").index)
              for w in (a, b)]
    assert len(imaged[0]) == len(imaged[1]) == 16
    assert A.compare_nondata(os.path.join(a, "release"), os.path.join(b, "release")) == []
    report = A.audit(a, only=["seed_material", "role_words", "role_identifiers", "identifier_order", "file_layout",
                              "build_residue", "manifest_verifies"])
    assert not _failed(report), json.dumps(_failed(report), indent=1)
    assert "imaging/: 16 npz" in _finding(report, "file_layout")["detail"]


def test_cli_reports_and_exits(tiny_world_noimaging, salted, tmp_path):
    planted = _copy(tiny_world_noimaging, tmp_path)
    with open(os.path.join(planted, "release", "data_dictionary.md"), "a") as fh:
        fh.write(f"\nbuilt from {hex(_seed(planted))}\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(A.__file__))))
    bad = subprocess.run([sys.executable, "-m", "pipeline.audit", planted, "--against", salted],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 1, bad.stderr
    assert "seed_material" in bad.stdout and "FAIL" in bad.stdout and "role_shuffle_invariance" in bad.stdout
    assert A.main([planted, "--json"]) == 1


# ----------------------------------------------------------------------------- planted leaks


def _plant_hex_in_dictionary(world):
    with open(os.path.join(world, "release", "data_dictionary.md"), "a") as fh:
        fh.write(f"\nbuild {format(_seed(world), 'x')}\n")
    return "data_dictionary.md"


def _plant_seed_int_in_parquet_metadata(world):
    _add_kv(os.path.join(world, "release", "covariates.parquet"), b"build", str(_seed(world)).encode())
    return "covariates.parquet"


def _plant_oracle_key_window_in_zattrs(world):
    key = json.load(open(os.path.join(world, "sealed", "oracle.json")))["oracle_key"]
    path = os.path.join(world, "release", "genotypes.zarr", ".zattrs")
    attrs = json.load(open(path))
    attrs["run"] = "r-" + key[2:][9:17]
    json.dump(attrs, open(path, "w"))
    return "genotypes.zarr/.zattrs"


def _plant_seed_words_in_column(world):
    path = os.path.join(world, "release", "ecg_features.parquet")
    df = pd.read_parquet(path)
    seed = _seed(world)
    df["batch"] = np.resize(np.array([seed & (2**64 - 1), seed >> 64], dtype=np.uint64), len(df))
    _rewrite_parquet(path, df)
    return "ecg_features.parquet [values of batch]"


def _plant_seed_in_file_name(world):
    open(os.path.join(world, "release", f"notes-{format(_seed(world), 'x')[4:14]}.txt"), "w").write("notes\n")
    return "[file names]"


def _plant_seed_in_vcf_body(world):
    with gzip.open(os.path.join(world, "release", "genotypes.vcf.gz"), "ab") as fh:
        fh.write(f"22\t50000000\t{_seed(world)}\tA\tC\t.\tPASS\t.\tGT\n".encode())
    return "genotypes.vcf.gz [decompressed]"


@pytest.mark.parametrize("plant", [_plant_hex_in_dictionary, _plant_seed_int_in_parquet_metadata,
                                   _plant_oracle_key_window_in_zattrs, _plant_seed_words_in_column,
                                   _plant_seed_in_file_name, _plant_seed_in_vcf_body])
def test_planted_seed_material_fails(plant, tiny_world_noimaging, tmp_path):
    world = _copy(tiny_world_noimaging, tmp_path)
    where = plant(world)
    f = _finding(A.audit(world, only=["seed_material"]), "seed_material")
    assert not f["passed"]
    assert any(p.startswith(where) for p in f["problems"]), f["problems"]


def test_driver_named_in_parquet_metadata_fails(tiny_world_noimaging, tmp_path):
    world = _copy(tiny_world_noimaging, tmp_path)
    driver = _truth(world)["drivers"][0]["protein"]
    _add_kv(os.path.join(world, "release", "covariates.parquet"), b"note", f"see {driver}".encode())
    report = A.audit(world, only=["role_identifiers", "role_words"])
    f = _finding(report, "role_identifiers")
    assert not f["passed"] and driver in " ".join(f["problems"])
    assert _finding(report, "role_words")["passed"]


def test_role_word_in_parquet_metadata_fails(tiny_world_noimaging, tmp_path):
    world = _copy(tiny_world_noimaging, tmp_path)
    _add_kv(os.path.join(world, "release", "proteomics.parquet"), b"decoy_panel", b"v1")
    f = _finding(A.audit(world, only=["role_words"]), "role_words")
    assert not f["passed"] and "decoy" in " ".join(f["problems"])


def test_data_dictionary_must_come_from_public_quantities(tiny_world_noimaging, tmp_path):
    world = _copy(tiny_world_noimaging, tmp_path)
    with open(os.path.join(world, "release", "data_dictionary.md"), "a") as fh:
        fh.write("\nSee also the release notes.\n")
    f = _finding(A.audit(world, only=["role_words"]), "role_words")
    assert not f["passed"] and "public quantities" in " ".join(f["problems"])


def test_role_word_rules():
    ok = [
        "t1map float32 native T1 in milliseconds; T1 mapping sequences; body weight in kg",
        "Imaging participation (selection into the imaged sub-study) depends on age, body size, ancestry and centre.",
    ]
    for text in ok:
        assert A.role_word_problems("x", text) == [], text
    bad = {
        "the T3 protein": "T3",
        "A9 pairs exist": "A9",
        "Imaging selection depends on disease severity.": "selection",
        "weights of each protein": "weights",
        "reverse_causation": "reverse_causation",
        "the driver_panel field": "driver",
        "random seed 7": "seed",
    }
    for text, word in bad.items():
        problems = A.role_word_problems("x", text)
        assert problems and word in problems[0], (text, problems)


def test_latent_copies_fail(tiny_world_noimaging, tmp_path):
    world = _copy(tiny_world_noimaging, tmp_path)
    lat = pd.read_parquet(os.path.join(world, "sealed", "latent.parquet"))
    mask = np.load(os.path.join(world, "sealed", "eval_mask.npy"))
    path = os.path.join(world, "release", "ecg_features.parquet")
    df = pd.read_parquet(path)
    df["qtc"] = 3.0 * lat["latent"].reindex(df.index).to_numpy() + 400.0
    df["hr_rest"] = np.exp(2.0 * lat["latent_late"].reindex(df.index).to_numpy())  # monotone, not linear
    df["flag"] = mask
    _rewrite_parquet(path, df)
    f = _finding(A.audit(world, only=["latent_values"]), "latent_values")
    text = " ".join(f["problems"])
    assert not f["passed"]
    assert "ecg_features.parquet:qtc" in text and "with L" in text
    assert "ecg_features.parquet:hr_rest" in text and "with L_late" in text
    assert "ecg_features.parquet:flag" in text and "eval_mask" in text


def test_build_residue_fails(tiny_world_noimaging, tmp_path):
    world = _copy(tiny_world_noimaging, tmp_path)
    rel = os.path.join(world, "release")
    os.makedirs(os.path.join(rel, ".hydra"))
    open(os.path.join(rel, ".hydra", "config.yaml"), "w").write("world: {}\n")
    open(os.path.join(rel, "build.log"), "w").write("done\n")
    open(os.path.join(rel, "proteomics.parquet.wip"), "wb").write(b"PAR1")
    shutil.copy(os.path.join(world, "sealed", "truth.json"), os.path.join(rel, "notes.json"))
    f = _finding(A.audit(world, only=["build_residue"]), "build_residue")
    text = " ".join(f["problems"])
    assert not f["passed"]
    for piece in (".hydra", "build.log", "proteomics.parquet.wip", "copy of sealed/truth.json"):
        assert piece in text, (piece, text)


def test_changed_column_order_fails(tiny_world_noimaging, tmp_path):
    world = _copy(tiny_world_noimaging, tmp_path)
    path = os.path.join(world, "release", "proteomics.parquet")
    df = pd.read_parquet(path)
    cols = list(df.columns)
    cols[3], cols[7] = cols[7], cols[3]
    _rewrite_parquet(path, df[cols])
    f = _finding(A.audit(world, only=["identifier_order"]), "identifier_order")
    assert not f["passed"] and "proteomics.parquet: column order" in " ".join(f["problems"])
    diffs = A.compare_nondata(os.path.join(tiny_world_noimaging, "release"), os.path.join(world, "release"))
    assert any("proteomics.parquet: column order" in d for d in diffs), diffs


def test_missingness_on_a_role_protein_fails(tiny_world_noimaging, tmp_path):
    world = _copy(tiny_world_noimaging, tmp_path)
    driver = _truth(world)["drivers"][0]["protein"]
    path = os.path.join(world, "release", "proteomics.parquet")
    table = pq.read_table(path)
    df = table.to_pandas()
    df.loc[df.index[::50], driver] = np.nan  # 2 % against the others' 0.4 %
    _rewrite_parquet(path, df)
    f = _finding(A.audit(world, only=["missingness_by_role"]), "missingness_by_role")
    assert not f["passed"] and driver in " ".join(f["problems"])


def test_targetability_outliers_fail(tiny_world_noimaging, tmp_path):
    world = _copy(tiny_world_noimaging, tmp_path)
    roles = [d["protein"] for d in _truth(world)["drivers"]] + [d["protein"] for d in _truth(world)["decoys"]]
    path = os.path.join(world, "release", "targetability.parquet")
    df = pd.read_parquet(path)
    df.loc[roles, "genetic_constraint"] = 0.03
    _rewrite_parquet(path, df)
    f = _finding(A.audit(world, only=["targetability_rows"]), "targetability_rows")
    assert not f["passed"] and "genetic_constraint" in " ".join(f["problems"])


def test_targetability_category_only_roles_carry(tiny_world_noimaging, tmp_path):
    """A label every role protein carries and no other does is a leak; one rare value that
    happens to fall on a role row (p = k / n) is not."""
    world = _copy(tiny_world_noimaging, tmp_path)
    truth = _truth(world)
    roles = [d["protein"] for d in truth["drivers"]] + [d["protein"] for d in truth["decoys"]]
    path = os.path.join(world, "release", "targetability.parquet")
    original = pd.read_parquet(path)
    df = original.copy()
    df.loc[roles[0], "paralog_redundancy"] = 17
    _rewrite_parquet(path, df)
    f = _finding(A.audit(world, only=["targetability_rows"]), "targetability_rows")
    assert f["passed"] and "values only on role rows ['17']" in f["detail"]
    df = original.copy()
    df.loc[roles, "paralog_redundancy"] = 17
    _rewrite_parquet(path, df)
    f = _finding(A.audit(world, only=["targetability_rows"]), "targetability_rows")
    assert not f["passed"] and "paralog_redundancy: values ['17'] occur only among role proteins" in " ".join(f["problems"])


def test_unstandardised_role_column_fails(tiny_built, tmp_path):
    """A role column on another scale than its table's other columns stands out."""
    world = _copy(tiny_built("null-01"), tmp_path)
    t1 = next(d["protein"] for d in _truth(world)["decoys"] if d["bias"] == "T1")
    assert _finding(A.audit(world, only=["column_summaries"]), "column_summaries")["passed"]
    path = os.path.join(world, "release", "proteomics.parquet")
    df = pd.read_parquet(path)
    df[t1] = (1.15 * df[t1] + 0.05).astype(np.float32)
    _rewrite_parquet(path, df)
    f = _finding(A.audit(world, only=["column_summaries"]), "column_summaries")
    assert not f["passed"] and f"{t1} (decoy T1) is not standardised" in " ".join(f["problems"])


def test_roles_alone_on_private_loci_fail(report_of, tmp_path):
    """If every ordinary protein shared a locus and the roles did not, a private
    locus would name the roles."""
    world = _copy(report_of("null-01")["world_dir"], tmp_path)
    path = os.path.join(world, "sealed", "hidden_model.json")
    hidden = json.load(open(path))
    roles = {d["protein"] for d in _truth(world)["decoys"]} | {_truth(world)["surrogate"]}
    proteins = json.load(open(os.path.join(world, "sealed", "oracle.json")))["proteins"]
    first = next(v for p, v in zip(proteins, hidden["protein_cis_variant"]) if p not in roles)
    hidden["protein_cis_variant"] = [v if p in roles else first for p, v in zip(proteins, hidden["protein_cis_variant"])]
    json.dump(hidden, open(path, "w"))
    f = _finding(A.audit(world, only=["cis_locus_sharing"]), "cis_locus_sharing")
    assert not f["passed"] and "100% of ordinary proteins share" in f["detail"]


def test_manifest_with_extra_content_fails(tiny_world_noimaging, tmp_path):
    world = _copy(tiny_world_noimaging, tmp_path)
    path = os.path.join(world, "release", "MANIFEST.json")
    doc = json.load(open(path))
    doc["world_id"] = "all-biases"
    doc["files"][0]["role"] = "none"
    json.dump(doc, open(path, "w"))
    f = _finding(A.audit(world, only=["manifest_contents"]), "manifest_contents")
    assert not f["passed"]
    assert "unexpected key 'world_id'" in f["problems"] and any("carries ['role']" in p for p in f["problems"])


def test_per_protein_file_fails(tiny_world_noimaging, tmp_path):
    world = _copy(tiny_world_noimaging, tmp_path)
    os.makedirs(os.path.join(world, "release", "extra"))
    np.save(os.path.join(world, "release", "extra", "PROT_0001.npy"), np.zeros(3))
    report = A.audit(world, only=["file_layout", "manifest_verifies"])
    assert "PROT_0001" in " ".join(_finding(report, "file_layout")["problems"])
    assert "present but not in the manifest" in " ".join(_finding(report, "manifest_verifies")["problems"])


def test_missing_sealed_input_fails_instead_of_passing(tiny_world_noimaging, tmp_path):
    world = _copy(tiny_world_noimaging, tmp_path)
    os.remove(os.path.join(world, "sealed", "latent.parquet"))
    failed = _failed(A.audit(world, only=["latent_values"]))
    assert set(failed) == {"sealed_inputs", "latent_values"}


# ----------------------------------------------------------------------------- compare_nondata can fail


def test_compare_nondata_sees_metadata_changes(tiny_world_noimaging, salted, tmp_path):
    world = _copy(salted, tmp_path)
    rel = os.path.join(world, "release")
    _add_kv(os.path.join(rel, "covariates.parquet"), b"pandas_note", b"x")
    path = os.path.join(rel, "genotypes.zarr", "variant_position", ".zattrs")
    attrs = json.load(open(path))
    attrs["units"] = "bp"
    json.dump(attrs, open(path, "w"), indent=2)
    with open(os.path.join(rel, "data_dictionary.tsv"), "a") as fh:
        fh.write("p0_i0\tExtra\tnone\n")
    manifest = json.load(open(os.path.join(rel, "MANIFEST.json")))
    manifest["files"] = manifest["files"][::-1]
    json.dump(manifest, open(os.path.join(rel, "MANIFEST.json"), "w"))
    os.remove(os.path.join(rel, "genotypes.vcf.gz.tbi"))
    diffs = "\n".join(A.compare_nondata(os.path.join(tiny_world_noimaging, "release"), rel))
    for piece in ("covariates.parquet: key-value metadata 'pandas_note'", "variant_position/.zattrs: Zarr metadata",
                  "data_dictionary.tsv: bytes differ", "MANIFEST.json file list: same members, different order",
                  "file list: only in A ['genotypes.vcf.gz.tbi']"):
        assert piece in diffs, (piece, diffs)


def test_compare_nondata_sees_npz_structure(imaging_pair, tmp_path):
    from pipeline.imaging.writer import npz_bytes

    a, b = imaging_pair
    world = _copy(b, tmp_path)
    folder = os.path.join(world, "release", "imaging")
    name = sorted(os.listdir(folder))[0]
    with np.load(os.path.join(folder, name)) as z:
        arrays = {"cine": z["cine"], "t1map": z["t1map"].astype(np.float64)}
    with open(os.path.join(folder, name), "wb") as fh:
        fh.write(npz_bytes(arrays))
    diffs = A.compare_nondata(os.path.join(a, "release"), os.path.join(world, "release"))
    assert any(d.startswith("imaging/: npz files differ") for d in diffs), diffs


def test_compare_missingness_sees_a_changed_pattern(tiny_world_noimaging, salted, tmp_path):
    world = _copy(salted, tmp_path)
    path = os.path.join(world, "release", "transcriptomics.parquet")
    df = pd.read_parquet(path)
    df.iloc[:5, 10] = np.nan
    _rewrite_parquet(path, df)
    diffs = A.compare_missingness(os.path.join(tiny_world_noimaging, "release"), os.path.join(world, "release"))
    assert diffs and diffs[0].startswith("transcriptomics.parquet: missing-value pattern differs")


def test_against_a_different_world_is_not_a_role_shuffle(tiny_world_noimaging, tiny_built):
    other = tiny_built("null-01")
    f = _finding(A.audit(tiny_world_noimaging, against=other, only=[]), "role_shuffle_pair")
    assert not f["passed"] and any("seeds differ" in p for p in f["problems"])


def test_needles_find_windows_across_chunk_boundaries(tiny_world_noimaging):
    secrets = A.Secrets.load(os.path.join(tiny_world_noimaging, "sealed"))
    needles = A.Needles(secrets)
    window = format(secrets.seed, "x")[5:13].encode()
    rng = np.random.default_rng(3)
    noise = rng.integers(0, 256, 4000, dtype=np.uint8).tobytes().replace(b"\x00", b"\x01")
    hits: list = []
    needles.scan_stream("s", [noise[:1996] + window[:4], window[4:] + noise[2000:]], hits)
    assert hits and "@ byte 1996" in hits[0] and "seed" in hits[0]
    clean: list = []
    needles.scan_stream("s", [noise[:2000], noise[2000:]], clean)
    decimal = str(secrets.seed)[3:15].encode()
    needles.scan("d", b"id=" + decimal + b";", False, clean)
    assert clean and clean[0].startswith("d @ byte 3")
