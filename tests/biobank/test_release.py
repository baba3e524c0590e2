"""The release as its users' tools see it: the loader (``pipeline.release``), the
data dictionary, Parquet in polars and duckdb, a plink2 sex file, and the MRI
geometry with a NIfTI view (issue 14, points 5 to 7)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import fsspec
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from pipeline import FORMAT_VERSION, release
from pipeline import data_dictionary as dd
from pipeline.manifest import build_manifest

LONG = ("mace_events", "ehr_diagnoses", "ehr_medications")


@pytest.fixture(scope="module")
def rel(tiny_world):
    return release.open(tiny_world)


@pytest.fixture(scope="module")
def messy_world(tiny_built):
    return tiny_built("hard-messy-01")


class _Local:
    """What ``build_manifest`` needs of an Output: a filesystem."""

    fs = fsspec.filesystem("file")


def _small_release(root, source_release: str, with_zarr_images: bool = False) -> str:
    """A release folder with two of the real tables, the dictionary and a manifest the build's code writes."""
    os.makedirs(root)
    for name in ("covariates.parquet", "mace_events.parquet", "data_dictionary.tsv"):
        shutil.copy(os.path.join(source_release, name), root)
    if with_zarr_images:
        from pipeline.imaging.writer import ImagingZarrWriter

        rng = np.random.default_rng(0)
        cine = rng.integers(0, 255, (2, 3, 25, 128, 128), dtype=np.uint8)
        t1map = rng.normal(1000, 100, (2, 3, 128, 128)).astype(np.float32)
        ImagingZarrWriter.create(os.path.join(root, "imaging.zarr"), ["SUBJ_00003", "SUBJ_00007"]).write(0, cine, t1map)
    manifest = build_manifest(_Local(), str(root), extra={"bundle": "release", "scale": "tiny"})
    with open(os.path.join(root, "MANIFEST.json"), "w") as fh:
        json.dump(manifest, fh)
    return str(root)


# ----------------------------------------------------------------------------- the loader

def test_open_checks_the_manifest_and_gives_tables(rel, tiny_world):
    assert rel.root == os.path.join(tiny_world, "release")  # a world folder opens its release
    assert rel.format_version == FORMAT_VERSION
    assert {"covariates", "proteomics", "mace_events", "targetability", "covariates_visit2"} <= set(rel.tables)
    cov = rel.table("covariates")
    assert isinstance(cov, pd.DataFrame) and cov.index.name == "subject_id" and len(cov) == 1200
    arrow = rel.table("covariates", arrow=True)
    assert arrow.num_rows == 1200 and "subject_id" in arrow.schema.names
    assert rel.table("mace_events", columns=["event"]).columns.tolist() == ["event"]
    with pytest.raises(release.ReleaseError, match="table 'covariate' is not in this release; valid: "):
        rel.table("covariate")
    assert release.open(os.path.join(tiny_world, "release"), verify="sizes").files == rel.files


def test_genotypes_and_the_xarray_dataset_agree(rel):
    from pipeline.config import ScaleConfig

    dosage = rel.genotypes()
    variants = ScaleConfig().variants  # the tiny scale's
    assert dosage.shape == (1200, variants) and (dosage.dtypes == np.int8).all()
    ds = rel.genotype_dataset()
    assert ds["call_genotype"].dtype == np.int8 and ds["call_genotype"].dims == ("variants", "samples", "ploidy")
    np.testing.assert_array_equal(ds["call_genotype"].values.sum(axis=2).T, dosage.to_numpy())
    # zarr 3 gives strings as numpy's StringDType or as objects: compare as Python lists
    assert [str(s) for s in ds["sample_id"].values.tolist()] == dosage.index.tolist()
    assert [str(v) for v in ds["variant_id"].values.tolist()] == dosage.columns.tolist()
    np.testing.assert_array_equal(ds["variant_AC"].values[:, 0], dosage.to_numpy().sum(axis=0))
    np.testing.assert_array_equal(ds["variant_AN"].values, np.full(variants, 2400))


def test_images_are_lazy_and_carry_their_geometry(rel):
    images = rel.images()
    cov = rel.table("covariates")
    assert sorted(images) == sorted(cov.index[cov["imaged"]])
    sid = next(iter(images))
    img = rel.image(sid)
    assert "_arrays" not in img.__dict__  # nothing read yet
    assert img.cine.shape == (3, 25, 128, 128) and img.cine.dtype == np.uint8
    assert img.t1map.shape == (3, 128, 128) and img.t1map.dtype == np.float32
    assert img.geometry == {"pixel_spacing_mm": (1.0, 1.0), "slice_thickness_mm": 8.0, "frame_interval_ms": 40.0}
    repeat = rel.images(2)
    assert 0 < len(repeat) and set(repeat) <= set(images)
    with pytest.raises(KeyError, match="no imaging image"):
        images["SUBJ_99999"]
    with pytest.raises(ValueError, match="visit: 1; valid: 0, 2"):
        rel.images(1)


def test_nifti_view_of_a_subject(rel, tmp_path):
    import nibabel as nib

    img = rel.image(next(iter(rel.images())))
    cine = img.nifti("cine")
    assert cine.shape == (128, 128, 3, 25)
    assert tuple(float(z) for z in cine.header.get_zooms()) == (1.0, 1.0, 8.0, 40.0)
    assert cine.header.get_xyzt_units() == ("mm", "msec")
    path = tmp_path / "cine.nii.gz"
    nib.save(cine, path)
    back = np.asarray(nib.load(path).dataobj)
    # voxel (x, y, slice, frame) is pixel [slice, frame, y, x]
    assert back[5, 9, 1, 12] == img.cine[1, 12, 9, 5]
    np.testing.assert_array_equal(back, np.transpose(img.cine, (3, 2, 0, 1)))
    t1 = img.nifti("t1map")
    assert t1.shape == (128, 128, 3) and np.allclose(t1.affine, np.diag([1.0, 1.0, 8.0, 1.0]))


def test_images_from_the_zarr_layout(tmp_path, tiny_world):
    root = _small_release(tmp_path / "release", os.path.join(tiny_world, "release"), with_zarr_images=True)
    rel = release.open(root)
    assert list(rel.images()) == ["SUBJ_00003", "SUBJ_00007"]
    img = rel.image("SUBJ_00007")
    assert img.cine.shape == (3, 25, 128, 128) and img.t1map.shape == (3, 128, 128)
    assert img.geometry["frame_interval_ms"] == 40.0 and img.geometry["pixel_spacing_mm"] == (1.0, 1.0)


def test_open_names_what_is_wrong(tmp_path, tiny_world):
    source = os.path.join(tiny_world, "release")
    root = _small_release(tmp_path / "release", source)
    release.open(root)

    with pytest.raises(release.ReleaseError, match="no such folder"):
        release.open(str(tmp_path / "nowhere"))
    cov = os.path.join(root, "covariates.parquet")
    data = bytearray(open(cov, "rb").read())
    data[100] ^= 0xFF
    open(cov, "wb").write(data)
    with pytest.raises(release.ReleaseError, match=r"covariates\.parquet: SHA-256 [0-9a-f]{12}\.\.\. differs"):
        release.open(root)
    release.open(root, verify="sizes")  # same size: only the hash tells
    release.open(root, verify=False)
    open(cov, "ab").write(b"x")
    with pytest.raises(release.ReleaseError, match=rf"covariates\.parquet: {len(data) + 1} bytes, the manifest says "
                                                    rf"{len(data)}"):
        release.open(root, verify="sizes")
    shutil.copy(os.path.join(source, "covariates.parquet"), cov)
    open(os.path.join(root, "extra.txt"), "w").write("stray")
    with pytest.raises(release.ReleaseError, match="extra.txt: present but not in the manifest"):
        release.open(root)
    os.remove(os.path.join(root, "extra.txt"))
    os.remove(os.path.join(root, "data_dictionary.tsv"))
    with pytest.raises(release.ReleaseError, match="data_dictionary.tsv: listed in the manifest but missing"):
        release.open(root)
    shutil.copy(os.path.join(source, "data_dictionary.tsv"), root)
    manifest_path = os.path.join(root, "MANIFEST.json")
    manifest = json.load(open(manifest_path))
    json.dump(dict(manifest, format_version="99"), open(manifest_path, "w"))
    with pytest.raises(release.ReleaseError, match="format_version '99' is not one this reader knows"):
        release.open(root, verify=False)
    os.remove(manifest_path)
    with pytest.raises(release.ReleaseError, match="no MANIFEST.json: the release is incomplete"):
        release.open(root, verify=False)
    with pytest.raises(ValueError, match="verify: 'yes'"):
        release.open(root, verify="yes")


def test_cli_summarises_and_writes_a_psam(tiny_world, tmp_path, capsys):
    psam = tmp_path / "genotypes.psam"
    assert release.main([tiny_world, "--sizes-only", "--psam", str(psam)]) == 0
    out = capsys.readouterr().out
    assert "covariates: 1200 rows x 11 columns" in out and "imaging: 240 subjects" in out
    assert psam.exists()
    assert release.main([str(tmp_path / "nowhere")]) == 1


# ----------------------------------------------------------------------------- conventions

def test_psam_gives_plink2_every_sex(rel, tmp_path):
    """A .psam by plink2's specification: a '#IID' header, then IID and SEX (1 male, 2 female) in the
    VCF's sample order; plink2, where installed, then reports no ambiguous sex."""
    text = rel.psam()
    lines = text.splitlines()
    assert lines[0] == "#IID\tSEX"
    rows = [line.split("\t") for line in lines[1:]]
    cov = rel.table("covariates")
    assert [r[0] for r in rows] == rel.genotypes().index.tolist() == cov.index.tolist()
    assert [r[1] for r in rows] == ["1" if s == 1 else "2" for s in cov["p31_i0"]]
    plink2 = shutil.which("plink2")
    if plink2 is None:
        return  # the format checks above are the whole test without plink2
    rel.write_psam(str(tmp_path / "g.psam"))
    vcf = os.path.join(rel.root, "genotypes.vcf.gz")
    log = subprocess.run([plink2, "--vcf", vcf, "--psam", str(tmp_path / "g.psam"), "--make-pgen", "--out",
                          str(tmp_path / "g")], check=True, capture_output=True, text=True).stdout
    n_male = int((cov["p31_i0"] == 1).sum())
    assert f"({1200 - n_male} females, {n_male} males;" in log and "ambiguous" not in log


def test_long_tables_have_no_index_column_in_polars_or_duckdb(rel):
    import duckdb
    import polars as pl

    for name in rel.tables:
        path = os.path.join(rel.root, f"{name}.parquet")
        names = pq.read_schema(path).names
        assert not any(c.startswith("__index_level") for c in names), name
        assert pl.read_parquet(path).columns == names, name
        assert duckdb.sql(f"select * from read_parquet('{path}') limit 1").columns == names, name
        if name in LONG:
            assert names[0] == "subject_id", name
            assert rel.table(name).index.equals(pd.RangeIndex(len(rel.table(name)))), name


def _values(series: pd.Series) -> set:
    return {None if pd.isna(v) else (v.item() if hasattr(v, "item") else v) for v in series.unique()}


@pytest.mark.parametrize("which", ["tiny", "messy"])
def test_data_dictionary_lists_every_column_and_every_code(which, rel, messy_world):
    r = rel if which == "tiny" else release.open(messy_world)
    tsv = r.dictionary
    assert list(tsv.columns) == list(dd.TSV_COLUMNS)
    with open(os.path.join(r.root, "data_dictionary.md")) as fh:
        md = fh.read()
    for name in r.tables:
        df = r.table(name)
        df = df.reset_index() if df.index.name else df
        rows = tsv[tsv["table"] == name]
        assert f"### {name}.parquet" in md, name
        for column in df.columns:
            row = dd.resolve(name, column)
            assert row is not None, f"{name}.{column} is not in the data dictionary"
            assert row.field_id in rows["field_id"].tolist() and f"| `{row.field_id}` |" in md
            if row.values:  # a coded column: nothing outside its codes but its listed sentinel codes
                # (an empty cell is missing, which data_dictionary.md describes table by table)
                stray = _values(df[column]) - set(row.values) - set(row.sentinels) - {None}
                assert not stray, f"{name}.{column} holds {stray}, not listed in the data dictionary"
    if which == "messy":
        cov = r.table("covariates")
        found = {c: sorted(set(_values(cov[c])) - set(dd.resolve("covariates", c).values)) for c in cov.columns
                 if dd.resolve("covariates", c).values}
        assert found["p20116_i0"] == [-3] and found["p21000_i0"] == [-3]
        for code in (-1, -3):
            assert f"{code} = {dd.SENTINEL_MEANING[code]}" in tsv.set_index(["table", "field_id"]).loc[
                ("covariates", "p22040_i0"), "sentinel_codes"]
        assert "Sentinel codes" in md and "`p22040_i0` (-1, -3)" in md
    else:
        assert "This release holds none" in md


def test_data_dictionary_says_where_codings_differ_from_uk_biobank(rel):
    tsv = rel.dictionary.set_index(["table", "field_id"])
    smoking = tsv.loc[("covariates", "p20116_i0")]
    assert smoking["coding"] == "0 = never, 1 = current" and "coding 90" in smoking["ukb_difference"]
    assert "1 means current here but previous there" in smoking["ukb_difference"]
    assert "p31 without an instance suffix" in tsv.loc[("covariates", "p31_i0"), "ukb_difference"]
    for table in ("covariates", "covariates_visit2"):
        assert "instance 0" in tsv.loc[(table, "imaged"), "description"], table
    assert "instance 2" in tsv.loc[("covariates_visit2", "p21003_i2"), "ukb_difference"]
    for field in ("p40000_i0", "p40001_i0", "followup_years", "death", "cause"):
        assert ("mortality", field) in tsv.index
    with open(os.path.join(rel.root, "data_dictionary.md")) as fh:
        md = fh.read()
    assert "## Differences from UK Biobank's codings" in md and "## Visits and the `imaged` flag" in md


# ----------------------------------------------------------------------------- validation output

def _report(checks, plots=None) -> dict:
    rows = [c.as_dict() for c in checks]
    return {"world_id": "w", "n_checks": len(rows), "n_failed": sum(r["status"] == "FAIL" for r in rows),
            "checks": rows, "_plots": plots or {}}


def _checks():
    from pipeline.validation.core import Check, at_least, band, underpowered

    return [
        band("age mean (years)", "calibration", 60.2, 60.3, 0.9),
        band("imaged fraction", "calibration", 0.5, 0.2, 0.01),
        Check("LD by distance", "calibration", float("nan"), None, None, None, False, "S1.1", "only 3 pairs",
              level="calibration"),
        band("T2: decoy loading on L", "mechanisms", 0.47, 0.5, 0.09, level="fidelity"),
        underpowered("T2: strong association with a null instrument", "mechanisms", 4.96, 5.0, "n = 1200"),
        at_least("T8: surrogate raises cardiac deaths (z)", "mechanisms", 5.9, 3.0),
        Check("analyst phenotype |r| with L", "mechanisms", 0.73, None, None, None, True, "", level="analyst"),
        Check("best single-protein |r| with L", "imaging", 0.55, None, None, None, True, "", level="calibration"),
        Check("trace figure t1_mean", "imaging", 1010.0, 1000.0, 975.0, 1025.0, True, "S2",
              "T3 world: reported, not checked", level="calibration", skipped=True),
    ]


def test_underpowered_reason_has_no_rounding_artefact():
    from pipeline.validation.core import below, underpowered

    assert below(4.96, 5.0) == ("4.96", "5")
    assert below(4.99999, 5.0) == ("4.99999", "5")
    assert below(2.13, 5.0) == ("2.1", "5")
    c = underpowered("x", "mechanisms", 4.96, 5.0, "n = 1200").as_dict()
    assert c["status"] == "skipped" and c["section"] == "analyst" and c["expected_z"] == 4.96
    assert c["detail"] == "underpowered at this scale: expected |z| 4.96, below the 5 needed. n = 1200"


def test_console_shows_sections_reasons_and_reported_rows():
    from pipeline.validation.core import format_console

    text = format_console(_report(_checks()))
    lines = text.splitlines()
    heads = [line for line in lines if line.startswith("== ")]
    assert [h.split(":")[0] for h in heads] == ["== Calibration", "== Fidelity", "== Analyst view", "== Imaging"]
    assert heads[0].endswith("(1 PASS, 2 FAIL)") and heads[2].endswith("(1 PASS, 1 skipped, 1 reported)")

    def result(name):
        return next(line for line in lines if name in line).split()[-1]

    assert result("analyst phenotype |r| with L") == "reported"
    assert result("best single-protein |r|") == "reported"
    assert result("LD by distance") == "FAIL"  # no criterion, but it could not be computed
    assert result("imaged fraction") == "FAIL" and result("age mean") == "PASS"
    i = next(k for k, line in enumerate(lines) if "strong association with a null instrument" in line)
    assert result("strong association") == "skipped"
    assert lines[i + 1] == "    why skipped: underpowered at this scale: expected |z| 4.96, below the 5 needed. n = 1200"
    assert "5.0 < 5.0" not in text
    assert "why skipped: T3 world: reported, not checked" in text
    assert lines[-1] == "w: 9 checks: 3 PASS, 2 FAIL, 2 skipped, 2 reported"


def test_html_report_has_a_summary_then_sections_and_figures_that_fit(tmp_path):
    from html.parser import HTMLParser

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pipeline.validation.report import write_html

    def wide_figure():
        fig, ax = plt.subplots(figsize=(16, 3))  # 1,440 px at the report's 90 dpi: wider than the page
        ax.plot([0, 1], [0, 1])
        return fig

    path = tmp_path / "validation.html"
    write_html(_report(_checks(), {"wide": {"draw": wide_figure}}), str(path))
    text = path.read_text()

    class Outline(HTMLParser):
        def __init__(self):
            super().__init__()
            self.h2, self.imgs = [], 0

        def handle_starttag(self, tag, attrs):
            if tag == "h2":
                self.h2.append(dict(attrs).get("id"))
            self.imgs += tag == "img"

    outline = Outline()
    outline.feed(text)
    assert outline.h2 == ["summary", "calibration", "fidelity", "analyst", "imaging", "plots"]
    assert outline.imgs == 1
    assert "figure img{max-width:100%;height:auto" in text
    summary = text[text.index("id='summary'"):text.index("id='calibration'")]
    assert "2 figures off their band." in summary and "imaged fraction" in summary and "LD by distance" in summary
    assert "<td><a href='#analyst'>analyst</a></td><td>1</td><td>0</td><td>1</td><td>1</td>" in summary
    assert "expected |z| 4.96, below the 5 needed" in text and ">reported<" in text
