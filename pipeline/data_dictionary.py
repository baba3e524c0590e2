"""The release's data dictionary: ``data_dictionary.tsv`` (one row per released
column) and ``data_dictionary.md`` (how the assays, units, sentinel codes and
missingness were produced, and the same columns table by table).

Both come from :data:`COLUMNS`, so they cannot disagree.  Column names and
codings are the supplement's; where they differ from UK Biobank's own use of
the same field ID the row says so (``ukb_difference``), and every sentinel code
a column can hold is listed (``sentinel_codes``).  The text describes the
measurement process only; it never names a planted mechanism or a protein with
a role, and ``data_dictionary.md`` depends on nothing but the number of
variants, the protein missingness and whether the world is hard-messy (the
leak audit re-renders it from those alone).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .modalities.messy import SENTINEL_COLUMNS
from .modalities.measurement import MESSY_LAB_CENTRES, MISSING_RATE
from .model.constants import CENTRE_CODES

TSV_COLUMNS = ("field_id", "description", "coding", "table", "sentinel_codes", "ukb_difference")
SENTINEL_MEANING = {-1: "do not know", -3: "prefer not to answer"}
_MESSY_ONLY = "hard-messy releases only"


@dataclass(frozen=True)
class Column:
    table: str
    field_id: str  # a column name, or a pattern such as PROT_<nnnn> for numbered families
    description: str
    coding: str
    ukb_difference: str = ""
    #: Every value a coded column holds besides its sentinel codes (empty: not a coded column).
    values: tuple = ()

    @property
    def sentinels(self) -> tuple:
        """The sentinel codes the column can hold (in hard-messy releases)."""
        return tuple(SENTINEL_COLUMNS.get(self.field_id, ())) if self.table == "covariates" else ()

    @property
    def sentinel_codes(self) -> str:
        if not self.sentinels:
            return ""
        return "; ".join(f"{c} = {SENTINEL_MEANING[c]}" for c in self.sentinels) + f" ({_MESSY_ONLY})"

    def matches(self, name: str) -> bool:
        if "<nnnn>" not in self.field_id:
            return name == self.field_id
        return re.fullmatch(re.escape(self.field_id).replace("<nnnn>", r"\d{4}"), name) is not None


_SUBJECT = "Participant identifier SUBJ_<nnnnn>"
_IMAGED_V0 = ("Participant has cardiac MRI from the baseline assessment (instance 0) in imaging/ "
              "(imaging.zarr in the Zarr layout)")
_UKB_INSTANCE_2 = ("UK Biobank's instance 2 is its first imaging visit; here instance 2 is the repeat assessment "
                   "about five years after baseline (the one with repeat MRI), and baseline MRI belongs to instance 0")

COLUMNS: tuple[Column, ...] = (
    # ---- covariates (baseline, instance 0) -------------------------------------------------
    Column("covariates", "subject_id", _SUBJECT, "string; the table's index"),
    Column("covariates", "p31_i0", "Sex", "0 = female, 1 = male",
           "UK Biobank records sex once, as p31 without an instance suffix; the coding is the same", (0, 1)),
    Column("covariates", "p21003_i0", "Age when attended assessment centre", "years, to 0.1",
           "UK Biobank gives whole years"),
    Column("covariates", "p21001_i0", "Body mass index (BMI)", "kg/m2, to 0.1"),
    Column("covariates", "p20116_i0", "Smoking status", "0 = never, 1 = current",
           "binary here; UK Biobank's coding 90 is -3 prefer not to answer, 0 never, 1 previous, 2 current, "
           "so 1 means current here but previous there", (0, 1)),
    Column("covariates", "p22040_i0", "Summed MET minutes per week for all activity", "MET-minutes/week",
           "UK Biobank derives this field and leaves it empty when unknown; here unknown answers keep the "
           "questionnaire's sentinel codes"),
    Column("covariates", "p54_i0", "UK Biobank assessment centre",
           "centre code (coding 10): " + ", ".join(str(c) for c in CENTRE_CODES),
           "10 of UK Biobank's centres", tuple(int(c) for c in CENTRE_CODES)),
    Column("covariates", "p21000_i0", "Ethnic background (top-level group)",
           "1 White, 2 Mixed, 3 Asian or Asian British, 4 Black or Black British, 5 Chinese, 6 Other",
           "top-level groups only; UK Biobank's coding 1001 also has the detailed codes (1001, 2001, ...) "
           "and -1 do not know", tuple(range(1, 7))),
    Column("covariates", "p53_i0", "Date of attending assessment centre", "date (YYYY-MM-DD)"),
    Column("covariates", "imaged", _IMAGED_V0, "bool", "not a UK Biobank field", (False, True)),
    Column("covariates", "visit2", "Participant attended the repeat assessment (instance 2, about five years later)",
           "bool", "not a UK Biobank field", (False, True)),
    # ---- covariates_visit2 (instance 2) -----------------------------------------------------
    Column("covariates_visit2", "subject_id", _SUBJECT + " (visit-2 attendees only)", "string; the table's index"),
    Column("covariates_visit2", "p31_i0", "Sex (from baseline)", "0 = female, 1 = male",
           "UK Biobank records sex once, as p31 without an instance suffix", (0, 1)),
    Column("covariates_visit2", "p21003_i2", "Age at the repeat assessment", "years, to 0.1", _UKB_INSTANCE_2),
    Column("covariates_visit2", "p21001_i2", "Body mass index (BMI) at the repeat assessment", "kg/m2, to 0.1",
           _UKB_INSTANCE_2),
    Column("covariates_visit2", "p20116_i2", "Smoking status at the repeat assessment", "0 = never, 1 = current",
           "binary here, not UK Biobank's coding 90 (1 = previous there); " + _UKB_INSTANCE_2, (0, 1)),
    Column("covariates_visit2", "p22040_i2", "Summed MET minutes per week at the repeat assessment",
           "MET-minutes/week", _UKB_INSTANCE_2),
    Column("covariates_visit2", "p54_i2", "Assessment centre of the repeat assessment", "centre code (coding 10)",
           _UKB_INSTANCE_2, tuple(int(c) for c in CENTRE_CODES)),
    Column("covariates_visit2", "p21000_i0", "Ethnic background (top-level group, from baseline)",
           "1 White, 2 Mixed, 3 Asian or Asian British, 4 Black or Black British, 5 Chinese, 6 Other",
           "top-level groups only", tuple(range(1, 7))),
    Column("covariates_visit2", "p53_i2", "Date of the repeat assessment", "date (YYYY-MM-DD)", _UKB_INSTANCE_2),
    Column("covariates_visit2", "imaged",
           "Participant has baseline cardiac MRI (instance 0), as in covariates; visit-2 attendees with it also have "
           "repeat MRI in imaging_visit2/", "bool", "not a UK Biobank field", (False, True)),
    # ---- molecular tables --------------------------------------------------------------------
    Column("proteomics", "subject_id", _SUBJECT, "string; the table's index"),
    Column("proteomics", "PROT_<nnnn>", "Plasma protein level at baseline",
           "float32, standardised to mean 0 and SD 1 within the cohort; NaN missing",
           "anonymous identifiers with no gene mapping"),
    Column("proteomics_visit2", "subject_id", _SUBJECT + " (visit-2 attendees only)", "string; the table's index"),
    Column("proteomics_visit2", "PROT_<nnnn>", "Plasma protein level at the repeat assessment (instance 2)",
           "float32 on the baseline scale (baseline cohort's mean and SD); NaN missing"),
    Column("transcriptomics", "subject_id", _SUBJECT, "string; the table's index"),
    Column("transcriptomics", "TRANS_<nnnn>", "Blood mRNA level at baseline, paired with PROT_<nnnn> by number",
           "float32, standardised within the cohort; NaN missing"),
    Column("metabolomics", "subject_id", _SUBJECT, "string; the table's index"),
    Column("metabolomics", "MET_<nnnn>", "Plasma metabolite concentration at baseline",
           "float32, mmol/L (mg/dL from one laboratory in hard-messy releases); NaN missing"),
    # ---- ECG and coronary CT (baseline) --------------------------------------------------------
    Column("ecg_features", "subject_id", _SUBJECT, "string; the table's index"),
    Column("ecg_features", "hr", "Ventricular rate of the resting 12-lead ECG", "beats per minute",
           "UK Biobank field 12336 (ventricular rate)"),
    Column("ecg_features", "pr", "PR interval", "ms", "UK Biobank field 22330 (PQ interval)"),
    Column("ecg_features", "qrs", "QRS duration", "ms", "UK Biobank field 12340 (QRS duration)"),
    Column("ecg_features", "qt", "QT interval", "ms", "UK Biobank field 22331 (QT interval)"),
    Column("ecg_features", "lvh_voltage_mv", "Sokolow-Lyon voltage", "mV"),
    Column("ecg_features", "qwave", "Pathological Q waves", "0/1", "", (0, 1)),
    Column("ecg_features", "lbbb", "Left bundle branch block", "0/1", "", (0, 1)),
    Column("coronary_ct", "subject_id", _SUBJECT, "string; the table's index"),
    Column("coronary_ct", "cac_agatston", "Coronary artery calcium score", "Agatston units"),
    Column("coronary_ct", "stenosis_lad_pct", "Maximal stenosis of the left anterior descending artery", "percent"),
    Column("coronary_ct", "stenosis_lcx_pct", "Maximal stenosis of the left circumflex artery", "percent"),
    Column("coronary_ct", "stenosis_rca_pct", "Maximal stenosis of the right coronary artery", "percent"),
    Column("coronary_ct", "stenosis_max_pct", "Largest of the three vessels' stenoses", "percent"),
    # ---- outcomes ------------------------------------------------------------------------------
    Column("mortality", "subject_id", _SUBJECT, "string; the table's index"),
    Column("mortality", "death", "Died during follow-up", "0/1", "not a UK Biobank field", (0, 1)),
    Column("mortality", "cause", "Cause of death", "cardiac / other; empty if alive", "not a UK Biobank field",
           ("cardiac", "other", None)),
    Column("mortality", "p40001_i0", "Underlying (primary) cause of death", "ICD-10: I51.9 cardiac, C80.9 other; "
           "empty if alive", "two codes only, standing for the cause above; UK Biobank has the full ICD-10 code",
           ("I51.9", "C80.9", None)),
    Column("mortality", "p40000_i0", "Date of death", "date; empty if alive"),
    Column("mortality", "followup_years", "Years from baseline to death or to censoring at 12 years", "years, to 0.001",
           "not a UK Biobank field"),
    Column("mace_events", "subject_id", _SUBJECT, "string; a column (several rows per participant possible)"),
    Column("mace_events", "event", "Major adverse cardiovascular event, the first of its type",
           "myocardial_infarction, stroke, heart_failure_hospitalisation, cardiac_death", "",
           ("myocardial_infarction", "stroke", "heart_failure_hospitalisation", "cardiac_death")),
    Column("mace_events", "years_from_baseline", "Years from baseline to the event", "years, to 0.001"),
    Column("ehr_diagnoses", "subject_id", _SUBJECT, "string; a column"),
    Column("ehr_diagnoses", "icd10", "Hospital diagnosis", "ICD-10 code",
           "UK Biobank keeps these as arrays p41270 (codes) and p41280 (dates), one row per participant"),
    Column("ehr_diagnoses", "date", "Date the diagnosis was first recorded (before or after baseline)", "date"),
    Column("ehr_medications", "subject_id", _SUBJECT, "string; a column"),
    Column("ehr_medications", "atc", "Medication taken at baseline", "ATC code"),
    Column("ehr_medications", "description", "Medication name", "text"),
    # ---- per protein ---------------------------------------------------------------------------
    Column("targetability", "protein", "Protein identifier PROT_<nnnn>", "string; the table's index"),
    Column("targetability", "localization", "Subcellular localisation",
           "secreted, plasma membrane, cytoplasm, nucleus, mitochondrion", "",
           ("secreted", "plasma membrane", "cytoplasm", "nucleus", "mitochondrion")),
    Column("targetability", "has_pocket", "A small-molecule binding pocket is predicted", "bool", "", (False, True)),
    Column("targetability", "paralog_redundancy", "Number of paralogs that may compensate", "count"),
    Column("targetability", "genetic_constraint", "Loss-of-function constraint (LOEUF-like)",
           "0.03-2.0; lower = more constrained"),
    Column("targetability", "tissue_specificity", "Tissue specificity of expression (tau)", "0-1"),
    Column("targetability", "tissue_restriction", "Tissue the expression is restricted to",
           "broad, heart, liver, kidney, blood, brain, skeletal muscle, adipose", "",
           ("broad", "heart", "liver", "kidney", "blood", "brain", "skeletal muscle", "adipose")),
)

TABLES = tuple(dict.fromkeys(c.table for c in COLUMNS))


def resolve(table: str, name: str) -> Column | None:
    """The dictionary row describing column ``name`` of ``table`` (None if there is none)."""
    return next((c for c in COLUMNS if c.table == table and c.matches(name)), None)


def _cell(text: str) -> str:
    if any(ch in text for ch in "\t\n"):
        raise ValueError(f"data dictionary text holds a tab or newline: {text!r}")
    return text


def render_tsv() -> str:
    """``data_dictionary.tsv``: one row per released column (numbered families as ``PROT_<nnnn>`` etc.)."""
    lines = ["\t".join(TSV_COLUMNS)]
    for c in COLUMNS:
        lines.append("\t".join(_cell(v) for v in (c.field_id, c.description, c.coding, c.table, c.sentinel_codes,
                                                  c.ukb_difference)))
    return "\n".join(lines) + "\n"


def _column_tables() -> str:
    parts = []
    for table in TABLES:
        parts.append(f"\n### {table}.parquet\n\n| column | description | coding | differs from UK Biobank |\n"
                     "|---|---|---|---|")
        for c in (c for c in COLUMNS if c.table == table):
            coding = c.coding + (f"; sentinel codes: {c.sentinel_codes}" if c.sentinel_codes else "")
            parts.append(f"| `{c.field_id}` | {c.description} | {coding} | {c.ukb_difference or '-'} |")
    return "\n".join(parts) + "\n"


COMMON = """# Data dictionary

All participant tables are keyed by `subject_id` (`SUBJ_<n>`): wide tables (one row
per participant) carry it as their index, long tables as a column.  Join tables on it.
`data_dictionary.tsv` lists every column of every table (one row each; numbered families
such as `PROT_<nnnn>` as one row) with its coding, the sentinel codes it can hold and how it
differs from UK Biobank's use of the same field; the same lists are at the end of this file.

## Visits and the `imaged` flag
Instance 0 (`_i0`) is the baseline assessment; instance 2 (`_i2`) is the repeat assessment
about five years later.  Baseline cardiac MRI belongs to instance 0: `imaged` means "has
baseline MRI in `imaging/`" in both `covariates` and `covariates_visit2`.  Repeat MRI
(`imaging_visit2/`) exists for visit-2 attendees with `imaged` true.

## Differences from UK Biobank's codings
Column names follow UK Biobank field IDs (`p<field>_i<instance>`) and the supplement's
codings, which differ from UK Biobank's own in these places:
- `p20116` (smoking) is binary here, 0 never and 1 current, not coding 90 (-3 prefer not to
  answer, 0 never, 1 previous, 2 current): 1 means current here and previous there.
- `p31` (sex) carries an instance suffix here (`p31_i0`); UK Biobank records it once as `p31`.
- `p21000` (ethnic background) holds the top-level groups 1-6 only.
- `p21003` (age) is given to 0.1 year; UK Biobank gives whole years.
- `p22040` (MET minutes) keeps the questionnaire's sentinel codes where UK Biobank leaves the
  derived field empty.
- Instance 2 is the repeat assessment with repeat MRI; in UK Biobank it is the first imaging
  visit, and its baseline assessment has no MRI.
- `p40001_i0` (cause of death) holds I51.9 (cardiac) or C80.9 (other) only.
- Hospital diagnoses are one row per code and date (`ehr_diagnoses`) rather than the arrays
  `p41270`/`p41280`; ECG and CT columns have descriptive names.

## covariates.parquet
Physical activity (p22040) is summed MET-minutes per week.  Imaging participation is not
random (it depends on age, body size, ancestry group and assessment centre, as in real
imaging sub-studies).  `visit2` marks participants who attended the repeat assessment.

## covariates_visit2.parquet, proteomics_visit2.parquet, imaging_visit2/
The repeat assessment (instance 2) for about 20 % of participants, drawn at random among
those alive at the time.  Proteins at visit 2 are on the baseline scale (standardised with
the baseline cohort's mean and SD), so change over time is visible.  Repeat MRI exists for
visit-2 attendees who were imaged at baseline.

## proteomics.parquet
Plasma proteins `PROT_xxxx`, one column each, standardised to mean 0 and SD 1 within the
cohort.  Identifiers are anonymous and carry no gene mapping.  Missing values (NaN) are
sparse; see "Missingness".

## transcriptomics.parquet
Matched blood mRNA `TRANS_xxxx`, paired one-to-one with `PROT_xxxx` by number,
standardised within the cohort.  Agreement between a transcript and its protein varies.

## metabolomics.parquet
Plasma metabolites `MET_xxxx` as concentrations in mmol/L (positive, right-skewed).

## ecg_features.parquet
Resting 12-lead ECG: `hr` (ventricular rate, bpm), `pr` (PR interval, ms), `qrs` (QRS
duration, ms), `qt` (QT interval, ms), `lvh_voltage_mv` (Sokolow-Lyon voltage, mV), `qwave`
(pathological Q waves, 0/1), `lbbb` (left bundle branch block, 0/1).

## coronary_ct.parquet
Coronary CT: `cac_agatston` (Agatston calcium score), per-vessel maximal stenosis in
percent (`stenosis_lad_pct`, `stenosis_lcx_pct`, `stenosis_rca_pct`) and `stenosis_max_pct`.

## ehr_diagnoses.parquet, ehr_medications.parquet
Linked hospital records: ICD-10 codes with the date first recorded (before or after the
baseline assessment), and ATC codes of medications at baseline with a description.

## mortality.parquet, mace_events.parquet
`death` (0/1), `cause` (`cardiac` / `other`), `p40001_i0` (primary cause of death,
ICD-10), `p40000_i0` (date of death), `followup_years` (years from baseline to death or to
administrative censoring at 12 years).  `mace_events` lists major adverse cardiovascular
events (myocardial infarction, stroke, heart-failure hospitalisation, cardiac death) with
years from baseline; a participant has at most one row per event type (the first).

## targetability.parquet
Per-protein druggability annotations, indexed by `protein`: subcellular `localization`,
`has_pocket`, `paralog_redundancy`, `genetic_constraint` (LOEUF-like, lower = more
constrained), `tissue_specificity` (tau, 0-1) and `tissue_restriction`.

## genotypes.vcf.gz (+ .tbi) and genotypes.zarr
{n_variants} biallelic variants on chromosomes 1-22 (GRCh38-like coordinates), phased
genotypes for every participant; INFO carries AC, AN and AF.  `genotypes.zarr` holds the
same calls in the VCF Zarr layout (as bio2zarr writes it: `call_genotype`,
`variant_position`, `variant_AC`, ...) and is what `load_genotypes()` reads.  No gene
coordinates or cis annotations are released.  The VCF's samples carry no sex; plink2 takes
it from `p31_i0` (`--update-sex`, see the README).

## imaging/SUBJ_xxxxx.npz
Cardiac MRI for imaged participants: `cine` uint8 (3 short-axis slices base/mid/apex, 25
frames over one cardiac cycle, 128 x 128) and `t1map` float32 native T1 in milliseconds
(3 slices, 128 x 128, NaN outside the myocardium), with the geometry `pixel_spacing_mm`
(row, column), `slice_thickness_mm` and `frame_interval_ms` (the same as attributes of the
arrays in the Zarr layout).  The three slices are separate planes, not a contiguous stack.
Images come from several acquisition sites (the assessment centre), each with its own
scanner characteristics.  No derived volumes, ejection fraction or mass are released.

## Missingness
- Proteins: about {protein_missing:.2%} of values, missing completely at random.
- Transcripts: about {tx_missing:.1%}; metabolites: about {met_missing:.0%}; at random.
- Imaging exists only for imaged participants; visit-2 tables only for attendees.
"""

NO_SENTINELS = """
## Sentinel codes
This release holds none: every coded value is one of the codes listed for its column.
"""

MESSY = """
## Data problems in this release (as in a real biobank)
- **Sentinel codes** in `covariates.parquet` follow UK Biobank: `-1` = do not know,
  `-3` = prefer not to answer.  Treat them as missing.  Columns and the codes each can
  hold: {sentinels}.
- **Heavier, non-random protein missingness**: failed assays are more frequent in some
  participants than others; missingness is not at random.
- **Mixed units in metabolomics**: samples processed by one laboratory (assessment centres
  {lab_centres}) were reported in mg/dL instead of mmol/L.
- **Implausible values**: a small number of ECG and CT values are data-entry errors
  (impossible intervals, negative or extreme scores); some ECG and CT values are missing.
"""

COLUMN_LISTS = """
## Every column, table by table
Numbered families (`PROT_<nnnn>`, `TRANS_<nnnn>`, `MET_<nnnn>`) are one row each.
"""


def render_markdown(world) -> str:
    text = COMMON.format(n_variants=world.n_variants, protein_missing=float(world.params["protein_missing"]),
                         tx_missing=MISSING_RATE["transcriptomics"], met_missing=MISSING_RATE["metabolomics"])
    if world.messy:
        lab = ", ".join(str(CENTRE_CODES[c]) for c in MESSY_LAB_CENTRES)
        sentinels = "; ".join(f"`{col}` ({', '.join(str(c) for c in codes)})" for col, codes in SENTINEL_COLUMNS.items())
        text += MESSY.format(lab_centres=lab, sentinels=sentinels)
    else:
        text += NO_SENTINELS
    return text + COLUMN_LISTS + _column_tables()
