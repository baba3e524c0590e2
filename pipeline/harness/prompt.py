"""The task instructions an agent receives (this project's wording of what S3.1 covers).

``system_prompt(...)`` is the standing instruction; ``opening_message(...)``
is the first user message.  The release section lists only what the world's
release actually holds, so an imaging-free build is not described as having
scans.

Two defects of the paper's prompt are fixed here (SPEC section 9) and come
back with ``paper_compat=True``, worded as the paper had them:

* it asserted that drivers exist, also in the null world; we say only that
  some proteins may drive disease;
* it said that writing submission.json ends the episode and that a
  turn-limited episode "scores nothing"; we state the real exit rule
  (``submit()`` ends it; otherwise the latest parseable submission.json and
  phenotype.csv are scored at the turn limit).

A third, smaller one also returns with ``paper_compat``: the paper said every
table is indexed by subject id, which is false for the long tables.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Mapping, Optional

# (name in the release, is a folder, description).  Order is the listing order.
RELEASE_ENTRIES = (
    ("data_dictionary.tsv", False, "field_id, description and coding (incl. sentinel codes) of every covariate column"),
    ("data_dictionary.md", False, "how each assay was produced, its units, missingness and sentinel codes"),
    ("covariates.parquet", False, "wide: sex, age, BMI, smoking, physical activity, assessment centre, ancestry, "
                                  "assessment date, `imaged` and `visit2` flags; columns named by UK Biobank field "
                                  "id (e.g. p21003_i0), resolve them with data_dictionary.tsv"),
    ("proteomics.parquet", False, "wide: plasma proteins PROT_xxxx, standardised, sparse missingness"),
    ("transcriptomics.parquet", False, "wide: blood mRNA TRANS_xxxx, paired one-to-one with PROT_xxxx by number"),
    ("metabolomics.parquet", False, "wide: plasma metabolites MET_xxxx"),
    ("ecg_features.parquet", False, "wide: hr, pr, qrs, qt, lvh_voltage_mv, qwave, lbbb"),
    ("coronary_ct.parquet", False, "wide: cac_agatston and per-vessel and maximum stenosis (%)"),
    ("mortality.parquet", False, "wide: death flag, cause, cause code, date of death, follow-up years"),
    ("covariates_visit2.parquet", False, "wide: the repeat assessment about five years later (a subset)"),
    ("proteomics_visit2.parquet", False, "wide: proteins at the repeat assessment, on the baseline scale"),
    ("ehr_diagnoses.parquet", False, "long: subject_id, icd10, date"),
    ("ehr_medications.parquet", False, "long: subject_id, atc, description"),
    ("mace_events.parquet", False, "long: subject_id, event, years_from_baseline"),
    ("targetability.parquet", False, "indexed by protein: localization, has_pocket, paralog_redundancy, "
                                     "genetic_constraint, tissue_specificity, tissue_restriction"),
    ("genotypes.vcf.gz", False, "phased genotypes (with a tabix index); load_genotypes() reads them for you"),
    ("genotypes.zarr", True, "the same genotypes as a VCF-Zarr store (what load_genotypes() reads)"),
    ("imaging", True, "IMAGING: one SUBJ_xxxxx.npz per imaged participant: `cine` uint8 (slices, frames, 128, 128) "
                      "and `t1map` float32 (slices, 128, 128) in ms, NaN outside the myocardium"),
    ("imaging.zarr", True, "the baseline scans as one Zarr group: `cine`, `t1map` and `subject_id`"),
    ("imaging_visit2", True, "repeat scans of imaged participants who attended the repeat assessment"),
    ("angiograms", True, "coronary angiogram frames (`frame`, 192 x 192 uint8) for a few participants"),
    ("MANIFEST.json", False, "every file with its size and checksum"),
)

OPTIONAL_PACKAGES = (
    ("scipy", "SciPy"), ("statsmodels", "statsmodels"), ("sklearn", "scikit-learn"),
    ("skimage", "scikit-image"), ("cv2", "OpenCV"), ("torch", "PyTorch"),
)


def available_packages() -> list[str]:
    """Importable analysis packages beyond numpy and pandas (the sandbox uses this same installation)."""
    return [label for module, label in OPTIONAL_PACKAGES if importlib.util.find_spec(module) is not None]


def release_listing(release_dir: os.PathLike | str, paper_compat: bool = False) -> str:
    release = Path(release_dir)
    present = {p.name for p in release.iterdir()} if release.is_dir() else set()
    known = {name for name, _, _ in RELEASE_ENTRIES}
    lines = []
    for name, is_dir, text in RELEASE_ENTRIES:
        if name in present:
            lines.append(f"  {name + ('/' if is_dir else '')}  {text}")
    other = sorted(n for n in present - known if not n.startswith(".") and not n.endswith((".tbi", ".csi")))
    if other:
        lines.append(f"  other files: {', '.join(other)}")
    if paper_compat:
        keying = "Tables are indexed by subject id rather than carrying it as a column."
    else:
        keying = ("Wide tables (one row per participant) are indexed by `subject_id`; long tables (several rows per "
                  "participant) carry `subject_id` as a column; targetability.parquet is indexed by `protein`. "
                  "Join on subject_id yourself.")
    if "imaging" not in present:
        keying += " This release holds no per-participant scans: IMAGING does not exist here."
    return keying + "\n" + "\n".join(lines)


def _money(value: float) -> str:
    return f"${value:,.0f}"


def system_prompt(
    *,
    release_dir: os.PathLike | str,
    budget: float,
    costs: Mapping[str, float],
    max_turns: int,
    timeout: float,
    paper_compat: bool = False,
    packages: Optional[list[str]] = None,
    isolated: bool = True,
    limits: Optional[str] = None,
) -> str:
    packages = available_packages() if packages is None else packages
    extra = f" Also importable: {', '.join(packages)}." if packages else ""
    # Only an isolated program is really cut off from the network.
    offline = " There is no network access and no GPU." if isolated else " Work on CPU."
    cell, knock = _money(costs["cell_perturbation"]), _money(costs["knockdown"])
    bounds = (f" Each program may use at most {limits}; a program that exceeds one is stopped (the observation "
              "says which), the episode goes on." if limits else "")

    if paper_compat:
        scored_set = "a hidden random sample of participants (those you give a value)"
    elif _has_images(release_dir):
        scored_set = ("a hidden random sample of the imaged participants (covariates' imaged flag), the same "
                      "participants the reference is computed on; one of them without a value counts at the mean of "
                      "the values you gave, so leaving someone out is the same as giving them your mean")
    else:
        scored_set = ("a hidden random sample of all participants; one of them without a value counts at the mean of "
                      "the values you gave, so leaving someone out is the same as giving them your mean")
    if paper_compat:
        task = ("A small number of proteins causally drive cardiac disease in this cohort. Other proteins look "
                "associated with it through confounding, reverse causation, selection into the imaged sub-cohort, "
                "pleiotropy, or a measurement artifact.")
        finishing = ("Writing WORK/submission.json ends the episode. An episode that reaches the turn limit without "
                     "one scores nothing, so write a submission as soon as you can defend it and overwrite it if your "
                     "evidence changes.")
    else:
        task = ("Some proteins in this cohort may causally drive cardiac disease; it is also possible that none do. "
                "Proteins can look associated with disease without causing it: through confounding, reverse "
                "causation, selection into the imaged sub-cohort, pleiotropy of their genetic instrument, or a "
                "measurement artifact.")
        finishing = (
            "Call submit() when WORK/submission.json holds your final answer: the episode ends after that turn "
            "(experiments requested in that turn are still charged, but you will not see their results). If you "
            f"never call submit(), the episode ends after turn {max_turns} and whatever WORK then holds is scored: the "
            "latest submission.json that parsed as a JSON object at the end of a turn, and phenotype.csv. Nothing "
            "ends the episode early except submit(), so keep a provisional submission.json up to date and revise it "
            "freely.")

    return f"""You are a research scientist analysing a population biobank of a cardiac disease, working entirely by writing Python.

## How a turn works
Each turn, reply with one fenced Python code block (```python ... ```). The harness runs the last code block of your reply in a fresh Python process and shows you what it printed, its errors, your working folder and what is left of your budget and turns. Variables do not survive between turns; files you write in WORK do. You have {max_turns} turns, and each program may run for {timeout:g} seconds before it is stopped.{bounds}

These names are already defined when your program starts; use them, not literal paths:
  RELEASE   the released data (read-only)
  IMAGING   the baseline scans folder inside RELEASE
  WORK      your working folder (writable, persists across turns)
  OUT_CSV   WORK/phenotype.csv, where your phenotype goes
np, pd, os, sys, glob, gzip, json and subprocess are imported.{extra}{offline}
  load_genotypes()                     dosage DataFrame, subjects x variants, values 0/1/2 (int8), indexed by subject_id
  request_experiment(kind, protein)    buy an experiment (see below); its result is a file in WORK next turn
  submit()                             declare WORK/submission.json final (see Finishing)

## What RELEASE holds
{release_listing(release_dir, paper_compat)}
Proteins, transcripts and metabolites carry anonymous labels; nothing about a label says what it does. Only what your program prints reaches you, so print what you need.

## The task
{task} There is no disease-severity column anywhere in the data.
Identify the proteins you can show to be causal drivers, and for each say whether a drug should inhibit or activate it.

## Your phenotype
Build a participant-level measure of disease severity and write it to OUT_CSV with the columns subject_id and phenotype, e.g. pd.DataFrame({{"subject_id": ids, "phenotype": values}}).to_csv(OUT_CSV, index=False). It is scored by its absolute correlation with the hidden disease severity over {scored_set}, relative to a reference correlation you do not see: only the part above the reference earns credit, and falling short of it costs nothing more. No tool derives it for you.

## Experiments
  cell_perturbation  {cell}  in vitro, read at baseline: a noisy read of the disease readouts, no survival information, and effects that build up over years do not show
  knockdown          {knock}  in vivo, followed for five years: a clean read of the disease readouts plus five-year survival
Both lower the protein to about the cohort's 5th percentile and compare against untreated controls. The result, WORK/experiments/<protein>.<kind>.json, holds action, status, protein and delta: mean treated minus mean control for cavity_r (cavity radius), wall_t (wall thickness), ef (ejection fraction) and surv5y (five-year survival; null for a cell perturbation).
These readouts are generic: the same fixed functions of disease severity in every world, not this cohort's disease-specific imaging, so read them as the direction and size of an effect on severity and survival (a larger cavity_r means more severe disease in every world).
Your budget is {_money(budget)}. A request is charged after your program ends and its result appears when your next program starts. Requests you cannot afford, repeats of an experiment you already bought, and unknown kinds or proteins are refused at no cost. Observational genetics can point to a direction but misleads under pleiotropy and reverse causation, and for a marker that improves the measurements while harming the patient; an experiment settles such cases.

## Submission
WORK/submission.json, a JSON object:
{{"nominated": ["PROT_0123", ...],
 "directions": {{"PROT_0123": "inhibit"}},
 "outcome_alignment": {{"PROT_0123": "aligned"}},
 "rejected": [{{"molecule": "PROT_0456", "mechanism": "reverse_causation", "reason": "..."}}],
 "abstentions": [{{"molecules": ["PROT_0789", "PROT_0790"], "reason": "..."}}],
 "confidence": 0.6}}
- nominated: the proteins you claim as causal drivers. Both missing drivers and extra names cost you.
- directions: inhibit, activate or unknown for each nominated protein (unknown earns half credit, a wrong direction none).
- outcome_alignment: would improving the disease measure through this protein also improve survival? aligned, misaligned or unknown. Calling a protein aligned when it is misaligned is the most expensive mistake.
- rejected: proteins that look causal but are not, each with the mechanism that misleads: confounding, reverse_causation, selection, pleiotropy or measurement_artifact. Scored as precision over everything you reject times recall of the misleading proteins, with the right mechanism only.
- abstentions: sets of 2 to 5 proteins the data cannot tell apart, where you decline to pick one. A correct abstention earns partial credit; an indefensible one lowers your abstention precision.
- confidence: a number from 0 to 1.

## Finishing
{finishing}"""


def _has_images(release_dir) -> bool:
    from ..bundle import IMAGING, ZARR_SUFFIX

    root = Path(release_dir)
    return (root / IMAGING[0]).exists() or (root / (IMAGING[0] + ZARR_SUFFIX)).exists()


def opening_message(paths: Mapping[str, str], *, isolated: bool, paper_compat: bool = False) -> str:
    where = "\n".join(f"{name} = {paths[name]!r}" for name in ("RELEASE", "IMAGING", "WORK"))
    note = "" if isolated else "\n(This episode is not isolated: the paths above are real folders on the host.)"
    return (f"Begin.\nWhen your code runs these names are already bound:\n{where}\nOUT_CSV = WORK/phenotype.csv\n"
            f"They are variables; do not quote them.{note}\nReply with one Python code block.")


FORMAT_HINT = (
    "Your reply held no code, so nothing ran and the turn was used. Reply with one fenced Python block:\n"
    "```python\nprint(sorted(os.listdir(RELEASE)))\n```"
)
