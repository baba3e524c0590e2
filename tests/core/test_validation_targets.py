"""Validation judges a world by an independent table, not by the generator's constants.

``pipeline/validation/targets.py`` holds every value validation expects; these tests pin
it to the numbers the supplement (and SPEC.md, where the seeds leave a parameter open)
states, check that every entry is used and sourced, and that no validation module
imports a generator module (at module level or inside a function), so that a wrong
constant in the generator fails validation instead of validating itself.  No world is
built here.
"""
from __future__ import annotations

import ast
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from pipeline.validation.targets import TABLE, V

ROOT = Path(__file__).resolve().parents[2]
VALIDATION = ROOT / "pipeline" / "validation"
#: Modules of validation: the package and its command line.
VALIDATION_FILES = sorted(VALIDATION.glob("*.py")) + [ROOT / "pipeline" / "validate.py"]

#: The project modules validation may import besides its own, and why.  Each is a reader of
#: the built world, a command-line shell or a formula of the model's documented equations,
#: none a module holding the generator's constants.
ALLOWED = {
    "pipeline.bundle": "the bundle contract: reads release/ and sealed/ (and sealed/world.yaml, the resolved config)",
    "pipeline.genotypes_io": "the harness's genotype reader",
    "pipeline.ld": "S1.1's bivariate-normal haplotype r, a formula of allele frequencies and distance (no constants)",
    "pipeline.imaging.measure": "the frozen baseline pipeline whose b the release defines (the measuring instrument)",
    "kernels.measure": "the baseline pipeline's kernels",
    "kernels.measure_features": "the baseline pipeline's one-pass measurement kernel",
    "kernels.numba_util": "the kernels' one Numba wrapper",
    "pipeline.commandline": "the command-line shell",
    "pipeline.kinds": "which kind of world validates itself (the dispatch of python -m pipeline.validate)",
}


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _imports(source: str, path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``source`` (the text of ``path``), at any
    depth, functions included; ``from X import name`` also yields ``X.name`` when that is a
    module (``from .. import pathways``)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                module = ".".join(base[:len(base) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                module = node.module
            out.append((node.lineno, module))
            out += [(node.lineno, f"{module}.{a.name}") for a in node.names if _is_module(f"{module}.{a.name}")]
    return out


def _allowed(module: str) -> bool:
    if module.split(".")[0] not in ("pipeline", "kernels"):
        return True  # not the project's
    return module in ALLOWED or module == "pipeline" or module.startswith("pipeline.validation")


def _violations(files: dict) -> list[str]:
    """``path:line: module`` of every import of a project module outside :data:`ALLOWED`."""
    return [f"{path.relative_to(ROOT)}:{line}: {module}" for path, source in files.items()
            for line, module in _imports(source, path) if not _allowed(module)]


def _read(paths) -> dict:
    return {p: p.read_text() for p in paths}


# ------------------------------------------------------------------------------- imports


def test_validation_imports_no_generator_module():
    bad = _violations(_read(VALIDATION_FILES))
    assert not bad, "validation imports the generator:\n" + "\n".join(bad)


def test_what_validation_may_import_imports_no_generator_module_either():
    origins = []
    for name in ALLOWED:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin, name
        origins.append(Path(spec.origin))
    bad = _violations(_read(origins))
    assert not bad, bad


def test_the_import_walk_sees_imports_inside_functions():
    """The walk can fail: generator imports hidden inside a function are found."""
    planted = ("from .core import Check\n\n\ndef f():\n    from ..model.constants import CARDIAC_L\n"
               "    from .. import pathways\n    import pipeline.blocks\n    return CARDIAC_L, Check\n")
    bad = _violations({VALIDATION / "planted.py": planted})
    assert [b.split(": ")[1] for b in bad] == ["pipeline.model.constants", "pipeline.pathways", "pipeline.blocks"], bad


def test_mechanisms_and_analyst_share_a_module_instead_of_importing_each_other():
    def validation_imports(name):
        path = VALIDATION / f"{name}.py"
        return {m.split(".")[2] for _, m in _imports(path.read_text(), path)
                if m.startswith("pipeline.validation.") and len(m.split(".")) > 2}

    assert "mechanisms" not in validation_imports("analyst")
    assert not validation_imports("context") & {"mechanisms", "analyst"}
    assert "context" in validation_imports("analyst") and "context" in validation_imports("mechanisms")
    assert not {"mechanisms", "analyst", "context"} & validation_imports("targets")


def test_validation_modules_are_under_600_lines():
    long = {p.name: n for p in VALIDATION.glob("*.py") if (n := len(p.read_text().splitlines())) >= 600}
    assert not long, long


# ------------------------------------------------------------------------------- the table


def test_every_entry_has_a_source():
    for name, target in TABLE.items():
        assert target.source.strip(), name
        assert any(ref in target.source for ref in ("S1.", "S2.", "SPEC", "Table S3", "Note S", "issue", "design value",
                                                    "acceptance")), (name, target.source)


def test_every_entry_is_used_by_validation():
    """No stale entry: each name is read as ``V.<name>`` somewhere in validation."""
    used = set()
    for path in VALIDATION_FILES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "V":
                used.add(node.attr)
    assert set(TABLE) - used == set(), sorted(set(TABLE) - used)
    assert used - set(TABLE) == set(), sorted(used - set(TABLE))


#: (name, the supplement's or SPEC's number, where it is stated)
STATED = [
    ("age_mean", 59.147, "S1.1 A ~ TN(59.147, 9.245^2; 45, 84)"),
    ("age_sd", 9.245, "S1.1"),
    ("age_lower", 45.0, "S1.1"),
    ("age_upper", 84.0, "S1.1"),
    ("male_fraction", 0.4804, "S1.1 S ~ Bernoulli(0.4804)"),
    ("bmi_centre", 28.3006, "S1.1 BMI = clip[28.3006 + ...]"),
    ("bmi_age_slope", 0.05, "S1.1 0.05(A - 59.147)"),
    ("bmi_sex_effect", 0.45, "S1.1 0.45(S - 0.4804)"),
    ("bmi_residual_sd", 5.05, "S1.1 residual standard deviation 5.05"),
    ("af_floor", 0.034381, "S1.1 0.034381 + (0.5 - 0.034381) Beta(0.734507, 1.064551)"),
    ("af_beta_a", 0.734507, "S1.1"),
    ("af_beta_b", 1.064551, "S1.1"),
    ("ld_decay_kb", 110.0, "S1.1 exp(-|pos_j - pos_k| / 110 kb)"),
    ("protein_age", 0.01, "S1.1 0.01(A - 55)"),
    ("protein_sex", 0.10, "S1.1 0.10 S"),
    ("protein_bmi", 0.02, "S1.1 0.02(BMI - 27)"),
    ("protein_residual_sd", 0.8, "S1.1 0.8 eps"),
    ("protein_trans_variance", 0.01, "S1.1 I_p sqrt(0.01) G_master"),
    ("protein_missingness", 0.004146, "S1.1 recorded aggregate rate (0.004146)"),
    ("latent_bmi", 0.15, "S1.2 0.15 z(BMI)"),
    ("latent_smoking", 0.10, "S1.2 0.10 Smoking"),
    ("latent_direct", 0.12, "S1.2 0.12 G_direct"),
    ("latent_age", 0.08, "S1.2 0.08 z(A)"),
    ("latent_residual", 0.55, "S1.5 residual SD 0.55"),
    ("hard_residual", 0.70, "S1.5 SD 0.70 in hard worlds"),
    ("hard_saturation", 1.6, "S1.2 f(P) = 1.6 tanh(P/1.6)"),
    ("late_carry", 0.75, "S1.3 0.75 L + 0.35 P^T w_late"),
    ("late_drivers", 0.35, "S1.3"),
    ("a9_base_fraction", (0.04, 0.10), "S1.3 w_base in [0.04, 0.10]; S1.5 4-10 %"),
    ("a9_late_ratio", (1.15, 1.45), "S1.5 1.15-1.45 times the largest"),
    ("t1_bmi_loading", 0.55, "S1.4 T1 z[0.55 z(BMI) + ...]"),
    ("t2_latent_loading", 0.50, "S1.4 T2 z[0.50 L + ...]"),
    ("t3_age", -0.24, "S1.4 T3 -0.24 A^z"),
    ("t3_bmi", -0.52, "S1.4 T3 -0.52 BMI^z"),
    ("t3_latent", 0.55, "S1.4 T3 0.55 eta L"),
    ("t3_protein", 0.55, "S1.4 T3 0.55 eta P^sel"),
    ("t3_noise", 1.35, "S1.4 T3 1.35 eps"),
    ("t6_edv", 0.22, "S1.4 T6 z(EDV) + 0.22 E"),
    ("t6_esv", -0.12, "S1.4 T6 z(ESV) - 0.12 E"),
    ("t7_direct", 0.14, "S1.4 T7 G^cis -> L (0.14)"),
    ("cardiac_latent", 0.70, "S1.4 T8 0.006 exp(0.70 L + ...)"),
    ("t8_hazard", 0.40, "S1.4 T8 + 0.40 P_T8"),
    ("t9_scale", 2.2, "S1.4 T9 2.2 P + 1.1"),
    ("t9_offset", 1.1, "S1.4 T9"),
    ("traits", ("edv", "esv", "wall", "motion", "lag", "t1"), "S1.3 table: EDV ESV Wall Motion Diastolic-lag Native-T1"),
    ("baseline_b", {"dcm": (0.40, 0.44), "hcm": (0.67, 0.68), "ischemic": (0.71, 0.72), "hfpef": (0.75, 0.76)},
     "S2.5 baselines 0.40-0.44 DCM, 0.67-0.68 HCM, 0.71-0.72 ischemic, 0.75-0.76 HFpEF"),
    ("supervised_ceiling", 0.85, "SPEC section 4 |r| ~ 0.85 (and the paper's S_phenotype = 10 min(|r| / 0.85, 1))"),
    # SPEC section 4's defaults table, for what the seeds leave open
    ("driver_weight", (0.30, 0.45), "SPEC defaults: |w| ~ U(0.30, 0.45)"),
    ("t3_eta", 1.0, "SPEC defaults: T3 eta = +1"),
    ("a9_partner_latent", 0.50, "SPEC defaults: partner = z[0.50 L_late + ...]"),
    ("link_r2", 0.05, "SPEC section 4: linked (r2 > 0.05)"),
]


@pytest.mark.parametrize("name, stated, where", STATED, ids=[s[0] for s in STATED])
def test_table_value_is_the_supplements(name, stated, where):
    value = TABLE[name].value
    assert (dict(value) if isinstance(stated, dict) else value) == stated, f"{name}: {value!r}, {where} says {stated!r}"


def test_archetype_loadings_are_the_supplements_table():
    # S1.3: EDV ESV Wall Motion Diastolic-lag Native-T1, one row per archetype
    assert dict(V.archetype_loadings) == {
        "dcm": (0.42, 0.70, -0.28, -0.18, 0.28, 0.15),
        "hcm": (-0.40, -0.12, 0.55, 0.05, 0.42, 0.42),
        "ischemic": (0.22, 0.42, -0.06, -0.46, 0.18, 0.35),
        "hfpef": (0.05, 0.06, 0.30, -0.02, 0.30, 0.95),
    }


def test_anchors_derived_from_the_supplements_counts():
    # Supplementary Note S2 (standard-03): n = 54000, deaths = 11795, cardiac deaths = 7237
    assert V.deaths_fraction == pytest.approx(11795 / 54000, abs=5e-6)
    assert V.cardiac_deaths_fraction == pytest.approx(7237 / 54000, abs=5e-6)
    # Supplementary Note S1: ehr_medications.parquet shape (82511, 3) for 54,000 participants
    assert V.medication_rows_per_participant == pytest.approx(82511 / 54000, abs=5e-4)
    # S1.1: the SD of Bernoulli(0.4804), to the 4 digits the traits' z(sex) uses
    assert V.sex_sd == round(math.sqrt(0.4804 * (1 - 0.4804)), 4)
    # Supplementary Note S2 pixel trace: mean T1 1000.59 ms, SD 104.87 ms, 1 %: 752.08, 99 %: 1243.40
    for key, stated in (("t1_mean", 1000.59), ("t1_sd", 104.87), ("t1_p01", 752.08), ("t1_p99", 1243.40)):
        assert V.pixel_trace[key][0] == pytest.approx(stated, abs=1.0), key
    # 0.8 ** 2 as validation uses it: the supplement's 0.8 residual, squared without a float's last-bit error
    assert round(V.protein_residual_sd ** 2, 12) == 0.64


def test_the_table_is_read_only():
    with pytest.raises(TypeError):
        TABLE["latent_bmi"] = None  # type: ignore[index]
    with pytest.raises(TypeError):
        V.baseline_b["dcm"] = (0.0, 1.0)


# ------------------------------------------------------------------------------- world-set values


def test_centre_codes_come_from_the_releases_data_dictionary(tmp_path):
    """The centre index of the hidden model's per-centre arrays is read from the release's
    coding of p54_i0, in its order (not from the generator's CENTRE_CODES)."""
    from pipeline import bundle
    from pipeline.data_dictionary import render_tsv
    from pipeline.validation.core import WorldDir
    from pipeline.model.constants import CENTRE_CODES  # the test may look: it checks the round trip

    release = tmp_path / bundle.RELEASE
    release.mkdir()
    (release / bundle.DATA_DICTIONARY_TSV).write_text(render_tsv())
    codes = WorldDir(str(tmp_path)).centre_codes
    assert codes.dtype == np.int64 and np.array_equal(codes, CENTRE_CODES)


def test_centre_codes_missing_from_the_dictionary_is_an_error_naming_the_file(tmp_path):
    from pipeline import bundle
    from pipeline.validation.core import WorldDir

    release = tmp_path / bundle.RELEASE
    release.mkdir()
    (release / bundle.DATA_DICTIONARY_TSV).write_text(
        "field_id\tdescription\tcoding\ttable\tsentinel_codes\tukb_difference\n"
        "p54_i0\tUK Biobank assessment centre\tcentre code\tcovariates\t\t\n")
    with pytest.raises(ValueError, match="p54_i0 coding 'centre code' lists no centre codes"):
        WorldDir(str(tmp_path)).centre_codes
