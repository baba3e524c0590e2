"""``data_dictionary.md``: the prose note on how the assays, units, sentinel codes
and missingness of a release were produced.  It describes the measurement
process only; it never names a planted mechanism or a protein with a role.
"""
from __future__ import annotations

from .modalities.measurement import MESSY_LAB_CENTRES, MISSING_RATE
from .world import CENTRE_CODES

COMMON = """# Data dictionary

All participant tables are keyed by `subject_id` (`SUBJ_<n>`): wide tables (one row
per participant) carry it as their index, long tables as a column.  Join tables on it.

## covariates.parquet
Columns are named by UK Biobank field ID (`p<field>_i<instance>`); `data_dictionary.tsv`
resolves each to its description and coding.  Instance 0 is the baseline assessment.
Physical activity (p22040) is summed MET-minutes per week.  `imaged` marks participants
with baseline cardiac MRI in `imaging/`; imaging participation is not random (it depends on
age, body size, ancestry group and assessment centre, as in real imaging sub-studies).
`visit2` marks participants who attended the repeat assessment about five years later.

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
genotypes for every participant.  `genotypes.zarr` holds the same calls in the VCF Zarr
layout (sgkit / bio2zarr names: `call_genotype`, `variant_position`, ...) and is what
`load_genotypes()` reads.  No gene coordinates or cis annotations are released.

## imaging/SUBJ_xxxxx.npz
Cardiac MRI for imaged participants: `cine` uint8 (3 short-axis slices base/mid/apex, 25
frames over one cardiac cycle, 128 x 128) and `t1map` float32 native T1 in milliseconds
(3 slices, 128 x 128, NaN outside the myocardium).  Images come from several acquisition
sites (the assessment centre), each with its own scanner characteristics.  No derived
volumes, ejection fraction or mass are released.

## Missingness
- Proteins: about {protein_missing:.2%} of values, missing completely at random.
- Transcripts: about {tx_missing:.1%}; metabolites: about {met_missing:.0%}; at random.
- Imaging exists only for imaged participants; visit-2 tables only for attendees.
"""

MESSY = """
## Data problems in this release (as in a real biobank)
- **Sentinel codes** in `covariates.parquet` follow UK Biobank: `-1` = do not know,
  `-3` = prefer not to answer (smoking, physical activity, ethnic background).  Treat them
  as missing.
- **Heavier, non-random protein missingness**: failed assays are more frequent in some
  participants than others; missingness is not at random.
- **Mixed units in metabolomics**: samples processed by one laboratory (assessment centres
  {lab_centres}) were reported in mg/dL instead of mmol/L.
- **Implausible values**: a small number of ECG and CT values are data-entry errors
  (impossible intervals, negative or extreme scores).
"""


def render_markdown(world) -> str:
    text = COMMON.format(n_variants=world.n_variants, protein_missing=float(world.params["protein_missing"]),
                         tx_missing=MISSING_RATE["transcriptomics"], met_missing=MISSING_RATE["metabolomics"])
    if world.messy:
        lab = ", ".join(str(CENTRE_CODES[c]) for c in MESSY_LAB_CENTRES)
        text += MESSY.format(lab_centres=lab)
    return text
