"""The analyst: a reference agent that solves a world by sound causal analysis.

It uses only what every agent gets - the release, the task prompt's facts and
experiments bought through the harness - and methods an epidemiologist would
defend.  The analysis runs inside the sandbox as the package ``lib`` (written to
WORK/analyst_lib/ on the first turn, then resumed every turn from its state in
WORK; numpy, pandas and scipy only).  Its steps:

1. Inventory.  Covariates are resolved through data_dictionary.tsv (UK Biobank
   field descriptions); documented sentinel codes and impossible values become
   missing.
2. Clinical features.  ECG, coronary CT (log Agatston, any calcium, stenoses),
   prevalent diagnoses (dated before the assessment) and baseline medications;
   outcomes: cardiac events early (0-5 years) and late (after 5 years, among
   those event-free then), incident heart-failure/cardiomyopathy diagnoses
   (codes recorded on the day of an adverse event are that event, not a new
   diagnosis).
3. MRI, its own segmentation.  The finite region of each T1 map is the
   end-diastolic myocardium; its most circular hole is the LV cavity.  Per slice
   and frame, a partial-volume blood-pool area inside the end-diastolic mid-wall
   (levels read per image, so a smooth site-specific intensity field cancels);
   end-systole at the smallest cavity; fractional area change, regional (12
   sectors) motion and its spread, wall thickness and systolic thickening along
   48 rays, half-refilling time, T1 median and spread in the LV wall.  The same
   for the repeat scans.
4. Phenotype.  Each modality's features are adjusted for age, sex, BMI,
   smoking, activity and ancestry (MRI also for site: batch).  Per modality, the
   combination that best predicts the other modalities (cross-fitted ridge,
   iterated: generalised canonical correlation) - a modality's own errors and
   benign influences no other modality shares (exercise remodelling, a marker
   that changes only the images) get no weight.  A one-factor model of the
   modality scores gives loadings; MRI's is put on the population scale with the
   imaged sub-cohort's factor mean and variance (selection on the factor leaves
   loadings unchanged).  Phenotype = the factor's conditional mean given the
   modalities a participant has.  The same weights on unadjusted features give
   the crude score a naive analysis would use; that score, severity including what
   risk factors contribute to it, is the submitted phenotype.
5. Genome scan.  Every protein against every variant: lead variant per protein
   (variants that are significant for more proteins than chance sharing allows,
   Poisson tail at Bonferroni level, are trans-acting hubs and never used as
   instruments); F = r^2 (n - 2) / (1 - r^2), usable if F > 10.  GWAS of the
   phenotype and the outcomes.
6. Evidence per protein: association with the phenotype (adjusted), with the
   crude score, within centres; site-scale heterogeneity (Brown-Forsythe, and
   whether one centre accounts for it); imaging participation given covariates
   and severity; association among the imaged
   and outside imaging; association with later disease beyond baseline severity
   (new heart-failure diagnoses, with the share a marker of current disease would
   show through the phenotype's measurement error subtracted, and the repeat MRI
   beyond the baseline scan; the two combined by Stouffer's method);
   Wald-ratio MR on the phenotype and on events, with delta-method SE; the
   instrument's direct effect with the protein held fixed (exclusion
   restriction); which other proteins the lead variant (or one in LD) instruments
   (colocalisation); whether the disease signal at the lead's locus is the
   lead's own (conditional analysis: the neighbour most associated with disease,
   both fitted jointly, and whether that neighbour moves the protein);
   reverse-direction MR with genome-wide significant variants for the phenotype
   as instruments.
7. Verdicts, in order: MR-significant (Bonferroni over instruments) proteins get
   no claim when colocalisation fails (the locus's disease peak is a neighbour
   that keeps its effect given the lead, the lead adds nothing given the peak and
   the peak does not move the protein: the signal is borrowed through LD), are
   an ambiguous shared locus if their signal tags another protein, pleiotropic if
   the instrument acts with the protein held fixed, the observational
   association falls short of the genetic one and the direct path carries most of
   the instrument's effect (holding a confounded exposure fixed biases the test a
   little, which a large cohort makes significant), a discordant marker if severity
   and events move in opposite directions, otherwise drivers (direction = MR
   sign).  A protein whose spread differs between centres, with the other centres
   agreeing once the most deviant one is left out, is a measurement artefact.
   Observational standouts (empirical null, Bonferroni) whose strong instrument
   shows nothing and excludes the association are reverse causation, unless they
   track later disease beyond baseline (a marker of the delayed process);
   standouts only before adjustment are confounded; proteins that drive imaging
   participation but are unrelated to disease outside imaging, with an imaged-only
   association of the collider sign, are selection.  Late-disease standouts
   without baseline association are delayed-effect candidates, each re-tested
   given the MR-supported proteins and the candidates already kept (conditional
   analysis, strongest first); the disease-following standouts are the possible
   markers of the late course, ordered by how far each runs ahead of current
   severity.
8. Experiments, ambiguous sets first: shared loci by cell perturbation one
   member at a time (the effect is there at baseline), delayed sets by knockdown
   of their candidates only (only a knockdown reads late effects; a null candidate
   is dropped, never convicting another by elimination); budget for the
   remaining members is reserved;
   then standouts with inconclusive instruments; then, with none reserved, the
   protein whose forward evidence is strongest among those that are nominal only
   (quiet at baseline, ahead of current severity, no early excess: a delayed
   effect too weak to establish by observation); then confirmation of drivers,
   weakest MR evidence first; then the other nominal forward signals, strongest
   first.  An exploratory knockdown nominates only on an effect of the episode's
   size (a protein that causes nothing shows none, so the test cannot mislead).
   A result is an effect when cavity radius and ejection fraction move in
   opposite directions (and, for a noisy cell read, by at least a quarter of the
   episode's largest change); lowering that worsens disease means activate;
   survival moving with severity is aligned, against it misaligned (never
   nominated).  An unresolved ambiguous set is abstained on (a delayed set:
   candidates and possible markers; the markers beyond the best guess keep their
   reverse-causation verdicts).
9. Report: WORK/evidence.csv and WORK/report.md (per candidate: associations,
   MR estimate and SE, F, adjustment results, experiment results, decision and
   why), printed in the transcript; then submit().
"""
from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

from ..base import Agent, EpisodeInfo, Observation, ScriptedAgent, fenced

LIB_DIR = Path(__file__).resolve().parent / "lib"
MISSING_MARK = "analyst_lib is missing"


def library_files() -> dict:
    """Relative path -> source of the sandbox library."""
    return {p.name: p.read_text() for p in sorted(LIB_DIR.glob("*.py"))}


def _install_code() -> str:
    blob = base64.b64encode(zlib.compress(json.dumps(library_files()).encode(), 9)).decode()
    return f"""import base64, zlib
_files = json.loads(zlib.decompress(base64.b64decode({blob!r})).decode())
_dest = os.path.join(WORK, "analyst_lib")
os.makedirs(_dest, exist_ok=True)
for _name, _text in _files.items():
    with open(os.path.join(_dest, _name), "w") as _handle:
        _handle.write(_text)
print("analyst library written:", ", ".join(sorted(_files)))
"""


class AnalystAgent(Agent):
    """Emits one program per turn that resumes the analysis; installs the library when needed."""

    name = "analyst"

    def reset(self, info: EpisodeInfo) -> None:
        super().reset(info)
        self._installed = False
        self._failures = 0

    def act(self, observation: Observation) -> str:
        text = (observation.stdout or "") + (observation.stderr or "")
        if observation.kind == "result" and observation.status != "ran":
            self._failures += 1
        elif observation.kind == "result":
            self._failures = 0
        if MISSING_MARK in text or "No module named 'analyst_lib'" in text:
            self._installed = False
        if self._failures >= 3:
            return fenced(_FALLBACK)
        code = ""
        if not self._installed:
            code += _install_code()
            self._installed = True
        code += self._turn_code(observation)
        return fenced(code)

    def _turn_code(self, observation: Observation) -> str:
        costs = json.dumps(self.info.costs)
        return f"""
if not os.path.exists(os.path.join(WORK, "analyst_lib", "__init__.py")):
    raise SystemExit("{MISSING_MARK}")
import analyst_lib
analyst_lib.run_turn(RELEASE=RELEASE, IMAGING=IMAGING, WORK=WORK, OUT_CSV=OUT_CSV, load_genotypes=load_genotypes,
                     request_experiment=request_experiment, submit=submit,
                     budget_remaining={float(observation.budget_remaining)!r},
                     turns_remaining={int(observation.turns_remaining)!r}, costs=json.loads({costs!r}),
                     time_limit={float(self.info.timeout)!r})
"""


# Submits whatever WORK holds (the scripted agents' fallback, with a line saying why).
_FALLBACK = 'print("three programs in a row failed: submitting what WORK holds")\n' + ScriptedAgent.FALLBACKS["biobank"]
