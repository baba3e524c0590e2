"""Configuration: dataclass schemas registered in Hydra's ConfigStore, YAML groups
in ``conf/`` layered on top, and one validation pass that fails before any
compute with a single line naming the field, the bad value and what is valid.

Groups: ``world/`` (one file per world), ``scale/`` (tiny, small, paper,
biobank), ``cluster/`` (local, sync, address), ``release/`` (what the release
holds), ``panel/`` (lists of worlds).  ``conf/config.yaml`` composes one world
(``world`` has no default: a build names its world), ``conf/panel_config.yaml``
a panel.  Both set Hydra to write nothing (no run folder, no ``.hydra`` copy of
the config, no log file); the entry points run as Hydra apps (``pipeline.cli``)
and library callers compose with :func:`load`.

Validation: every leaf field has a rule in ``FIELD_RULES`` (keys the schema does
not have, ``+`` additions included, are refused), then the rules that involve
several fields.  What depends on the machine (memory, disk, the output location,
the scheduler) is checked by ``pipeline.preflight``, also before any compute.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, List, Optional

from omegaconf import MISSING, OmegaConf

from .paths import CONF_DIR

ARCHETYPES = ("dcm", "hcm", "ischemic", "hfpef")
BIASES = ("T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8", "T9", "A9")
# Biases that plant a scored non-causal protein, and the rejection mechanism that names it.
DECOY_MECHANISM = {
    "T1": "confounding",
    "T2": "reverse_causation",
    "T3": "selection",
    "T7": "pleiotropy",
    "T9": "measurement_artifact",
}
SCALES = ("tiny", "small", "paper", "biobank")
# Test-only switches of world.test_leaks: each restores one role tell or unplanned
# trap the generator used to have (issue 12), so the tell scan can be shown to catch it.
TEST_LEAKS = ("transcripts", "communality", "weak_instrument", "cis_sharing", "t8_signs", "t4_separable")
CLUSTER_KINDS = ("local", "sync", "address")
IMAGING_LAYOUTS = ("npz", "zarr", "none")
# Participants per random-number block.  Fixed forever: changing it changes every world.
BLOCK_SIZE = 1000


class ConfigError(ValueError):
    """An invalid configuration value; the message is one line naming the field."""


# --------------------------------------------------------------------------- schemas


@dataclass
class ScaleConfig:
    """Sizes of a world.  Only sizes differ between scales, never the model."""

    name: str = "tiny"
    participants: int = 1200  #: cohort size
    imaged: int = 240  #: participants with baseline cardiac MRI (top of the selection score)
    proteins: int = 300  #: plasma proteins (each paired with one transcript)
    variants: int = 1024  #: genotyped variants over 22 chromosomes
    metabolites: int = 40  #: plasma metabolites


@dataclass
class ClusterConfig:
    """Where the Dask graph runs.  None of these fields changes a single output byte."""

    kind: str = "local"  #: local (in-process LocalCluster), sync (one thread), address (existing scheduler)
    address: Optional[str] = None  #: tcp://host:8786 when kind=address
    n_workers: Optional[int] = None  #: local worker processes; default = cores
    threads_per_worker: int = 1
    memory_limit: str = "auto"  #: per local worker
    chunk_blocks: int = 4  #: participant blocks per Dask task (a chunking choice only)
    progress: bool = True  #: show per-stage progress on stderr
    dashboard_address: Optional[str] = "127.0.0.1:8787"  #: Dask dashboard of a local cluster (host:port; null = none)


@dataclass
class ReleaseConfig:
    """What the release bundle holds and how it is encoded."""

    imaging: str = "npz"  #: npz (one file per participant), zarr (one store), none (no pixels)
    visit2_imaging: bool = True  #: repeat MRI for imaged participants who attended visit 2
    angiograms: int = 0  #: coronary angiogram frames for a small random subset (0 = none; not yet rendered)
    vcf: bool = True
    genotype_zarr: bool = True
    parquet_compression: str = "zstd"
    parquet_compression_level: int = 3


@dataclass
class T1Params:
    bmi_loading: float = 0.55  #: decoy = z[ordinary protein + 0.55 z(BMI)], residual sqrt(0.8^2 - 0.55^2)
    residual: float = 0.8  #: the supplement's residual, used only by the test_leaks=communality equation


@dataclass
class T2Params:
    latent_loading: float = 0.50  #: decoy = z[ordinary protein + 0.50 L], residual sqrt(0.8^2 - 0.50^2)
    residual: float = 0.75  #: the supplement's residual, used only by the test_leaks=communality equation


@dataclass
class T3Params:
    eta: float = 1.0  #: selection score uses 0.55 eta L + 0.55 eta P_sel
    age: float = -0.24
    bmi: float = -0.52
    latent: float = 0.55
    protein: float = 0.55
    noise: float = 1.35


@dataclass
class T4Params:
    shared: bool = True  #: the partner's cis variant is the driver's (false: its own locus; a negative control)


@dataclass
class T5Params:
    amplitude: float = 0.12  #: SD of the smooth multiplicative site field b_site(u)
    n_terms: int = 6  #: number of smooth basis terms in each site's field


@dataclass
class T6Params:
    edv: float = 0.22  #: z(EDV) += 0.22 z(E)
    esv: float = -0.12  #: z(ESV) += -0.12 z(E)


@dataclass
class T7Params:
    direct: float = 0.14  #: the decoy's standardised cis genotype adds 0.14 G to L


@dataclass
class T8Params:
    hazard: float = 0.40  #: + 0.40 P_T8 in the cardiac log-hazard
    imaging: float = 1.0  #: scale of the imaging effect delta_k = -imaging c_a alpha_a,k (c_a per archetype; 0 = none)


@dataclass
class T9Params:
    scale: float = 2.2  #: the site reports the decoy as 2.2 P + 1.1
    offset: float = 1.1
    site_age_shift: float = 8.0  #: the site's participants are older (years) ...
    site_bmi_shift: float = 3.0  #: ... heavier (kg/m2) ...
    site_smoking_logodds: float = 0.8  #: ... and smoke more, so its mean L is higher


@dataclass
class A9Params:
    late_ratio: List[float] = field(default_factory=lambda: [1.15, 1.45])  #: |w_late| / max other |w|
    base_fraction: List[float] = field(default_factory=lambda: [0.04, 0.10])  #: |w_base| / |w_late|
    partner_latent: float = 0.50  #: partner = z[ordinary protein + 0.50 L_late], residual sqrt(0.8^2 - 0.50^2)
    partner_residual: float = 0.75  #: the supplement's residual, used only by the test_leaks=communality equation
    driver_h2: float = 0.02  #: the delayed driver's fixed h2, used only by test_leaks=weak_instrument (else drawn from cis_h2_weak)


@dataclass
class HardParams:
    saturation: float = 1.6  #: f(P) = 1.6 tanh(P / 1.6)
    interaction: float = 0.5  #: 1/2 min(|w1|,|w2|) P1 P2
    polygenic_sd: float = 0.25  #: SD of the polygenic background G_poly
    polygenic_variants: int = 200
    residual: float = 0.70


@dataclass
class MessyParams:
    sentinel_rate: float = 0.01  #: fraction of covariate cells replaced by -1/-3 codes
    protein_missing_base: float = 0.02  #: heavier protein missingness
    protein_missing_bmi: float = 0.8  #: log-odds slope of missingness on z(BMI) (not at random)
    implausible_rate: float = 0.001  #: implausible values in ECG and CT
    mixed_unit_fraction: float = 0.3  #: fraction of metabolomics rows reported in mg/dL instead of mmol/L


@dataclass
class BiasParams:
    T1: T1Params = field(default_factory=T1Params)
    T2: T2Params = field(default_factory=T2Params)
    T3: T3Params = field(default_factory=T3Params)
    T4: T4Params = field(default_factory=T4Params)
    T5: T5Params = field(default_factory=T5Params)
    T6: T6Params = field(default_factory=T6Params)
    T7: T7Params = field(default_factory=T7Params)
    T8: T8Params = field(default_factory=T8Params)
    T9: T9Params = field(default_factory=T9Params)
    A9: A9Params = field(default_factory=A9Params)
    hard: HardParams = field(default_factory=HardParams)
    messy: MessyParams = field(default_factory=MessyParams)


@dataclass
class WorldConfig:
    """One world: its identity, disease architecture and planted biases."""

    id: str = MISSING  #: world identifier (also the output folder name)
    seed: Optional[str] = None  #: >=128-bit secret; None for held-out worlds (taken from seeds=<file>)
    archetype: str = "dcm"  #: dcm | hcm | ischemic | hfpef
    hard: bool = False  #: tanh saturation, driver interaction, polygenic background, residual SD 0.70
    messy: bool = False  #: sentinel codes, non-random missingness, mixed units, implausible values
    n_drivers: int = 3  #: causal driver proteins (0 = null world)
    biases: List[str] = field(default_factory=lambda: ["T5", "T6", "T8"])
    driver_weight: List[float] = field(default_factory=lambda: [0.30, 0.45])  #: |w| ~ U(lo, hi)
    cis_h2: List[float] = field(default_factory=lambda: [0.03, 0.25])  #: h2 ~ U(lo, hi) (the mixture's main component)
    cis_h2_weak: List[float] = field(default_factory=lambda: [0.01, 0.03])  #: weak component of the h2 mixture (the A9 driver's)
    cis_h2_weak_fraction: float = 0.25  #: share of proteins drawing h2 from the weak component
    af_beta: List[float] = field(default_factory=lambda: [0.734507, 1.064551])  #: q = 0.034381 + (0.5 - 0.034381) Beta(a, b)
    ld_decay_kb: float = 110.0  #: latent correlation exp(-|dpos| / ld_decay) between variants
    trans_fraction: float = 0.20  #: proteins with a trans (master-regulator) effect of sqrt(0.01)
    n_factors: int = 12  #: shared latent biological factors
    factor_loading_sd: float = 0.15
    concordance: List[float] = field(default_factory=lambda: [0.30, 0.60])  #: protein-transcript concordance ~ U(lo, hi)
    protein_missing: float = 0.004146
    latent_residual: float = 0.55  #: residual SD of L (hard worlds use bias_params.hard.residual)
    morphology_residual: float = 0.35  #: SD of the oracle's shared morphology residual
    visit2_fraction: float = 0.20
    visit2_years: float = 5.0
    eval_fraction: float = 0.20
    followup_years: float = 12.0
    n_centres: int = 10
    roles_salt: Optional[str] = None  #: re-deal the roles over protein identifiers (leak audit); None = the seed's own deal
    bias_params: BiasParams = field(default_factory=BiasParams)
    #: TEST-ONLY, never in a benchmark world: names from TEST_LEAKS, each restoring one
    #: role tell of the pre-issue-12 generator (transcripts mixed before the bias
    #: equations, bias equations without factors and covariates, the A9 driver's fixed
    #: weakest instrument, unconstrained cis loci, DCM-fixed surrogate imaging signs, a
    #: T4 pair separable by association) so the tell scan can be shown to catch it.
    test_leaks: List[str] = field(default_factory=list)


@dataclass
class OracleConfig:
    paper_compat: bool = False  #: cell perturbation returns surv5y as the paper's harness did
    realism: bool = False  #: assay noise and small off-target effects on otherwise-null proteins


@dataclass
class RootConfig:
    world: WorldConfig = MISSING
    scale: ScaleConfig = MISSING
    cluster: ClusterConfig = MISSING
    release: ReleaseConfig = MISSING
    oracle: OracleConfig = field(default_factory=OracleConfig)
    out: str = "./worlds"  #: local path or fsspec URL
    seeds: Optional[str] = None  #: sealed seed file (YAML/JSON mapping world id -> seed) for held-out worlds
    paper_compat: bool = False  #: restore every defect of the original (SPEC section 9)


@dataclass
class PanelConfig:
    id: str = MISSING
    worlds: List[str] = MISSING  #: world ids, each a file of conf/world/


@dataclass
class PanelAppConfig(RootConfig):
    """``python -m pipeline.panel``: every world of ``panel`` with the same scale,
    cluster, release and output (``world`` stays unset: the panel names them)."""

    panel: PanelConfig = MISSING
    jobs: int = 4  #: client threads driving world builds at once on the shared cluster


def register_configs() -> None:
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="base_config", node=RootConfig)
    cs.store(name="base_panel_config", node=PanelAppConfig)
    cs.store(group="world", name="base_world", node=WorldConfig)
    cs.store(group="scale", name="base_scale", node=ScaleConfig)
    cs.store(group="cluster", name="base_cluster", node=ClusterConfig)
    cs.store(group="release", name="base_release", node=ReleaseConfig)


# --------------------------------------------------------------------------- compose


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


CONFIG_GROUPS = ("world", "scale", "cluster", "release", "panel")


def parse_overrides(overrides: list[str], multirun: bool = False) -> list:
    """Hydra's own parse of command-line overrides, errors as one line.  Outside
    a multirun a sweep (``world=a,b``) is an error that says to add ``-m``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException as exc:
        raise ConfigError(" ".join(str(exc).split())) from None
    for ov in parsed:
        key = ov.get_key_element()
        if ov.key_or_group.split("/")[0].split(".")[0] == "hydra":
            raise ConfigError(f"{key}: Hydra's own settings are fixed (no run folder, no .hydra copy of the config, no log "
                              "file next to a release); valid: overrides of world, scale, cluster, release, out, seeds")
        if ov.is_sweep_override() and not multirun:
            raise ConfigError(f"{ov.input_line}: a sweep runs one build per value; valid: add -m (--multirun), or give one value")
        if ov.key_or_group in CONFIG_GROUPS and not ov.is_delete() and not ov.is_sweep_override():
            value = ov.value()
            options = group_options(ov.key_or_group)
            if value not in options:
                raise ConfigError(f"{ov.key_or_group}: unknown {ov.key_or_group} {value!r}; valid: {', '.join(options)}")
    return parsed


def compose(overrides: list[str] | None = None, config_name: str = "config"):
    """Compose a config of ``conf/`` with command-line style overrides (no run folder)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    overrides = list(overrides or [])
    parse_overrides(overrides)
    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = hydra_compose(config_name=config_name, overrides=overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(_one_line(exc)) from None
    finally:
        GlobalHydra.instance().clear()
    return cfg


def _one_line(exc: Exception) -> str:
    """Hydra wraps OmegaConf's typed-schema errors; report the key, the value and the type."""
    cause = exc.__cause__ or exc
    text = str(cause)
    key = re.search(r"full_key:\s*(\S+)", text)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    if "Could not override" in text or "Could not append" in text or "Could not delete" in text:
        m = re.search(r"Could not (?:override|append to config|delete from config)[^']*'([^']+)'", text)
        name = m.group(1) if m else "?"
        return f"{name}: {first.rstrip('.')}; valid: {_valid_fields(name.rpartition('.')[0])}"
    if key:
        name = key.group(1)
        if "does not support deletion" in text:
            return f"{name}: {first}; valid: set a value instead (fields cannot be removed)"
        if name not in FIELD_RULES and name not in PANEL_FIELD_RULES:
            return f"{name}: no such field; valid: {_valid_fields(name.rpartition('.')[0])}"
        expected = _field_type(name)
        return f"{name}: {first}" + (f"; valid: {expected}" if expected else "")
    return " ".join(text.split())[:400]


# --------------------------------------------------------------------------- field rules
#
# Every leaf field of the schema has one rule in FIELD_RULES (a test checks the
# table against the dataclasses): its type, range or choices, and why.  Rules
# that involve two fields (imaged <= participants, the roles' proteins) and the
# seed are checked after the table, in validate().

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Rule:
    """How one field is checked; ``check`` raises ConfigError naming the field."""

    kind: str  # "int", "float", "bool", "choice", "text", "pair", "custom"
    lo: Optional[float] = None
    hi: Optional[float] = None
    lo_open: bool = False
    hi_open: bool = False
    options: tuple = ()
    pattern: Optional[str] = None
    optional: bool = False  #: None is valid
    why: str = ""  #: appended to "valid: ..." (the reason for a bound)
    fn: Any = None  #: custom check(name, value)

    def valid(self) -> str:
        if self.kind == "custom":
            return self.why
        if self.kind == "bool":
            text = "true or false"
        elif self.kind == "choice":
            text = ", ".join(str(o) for o in self.options)
        elif self.kind == "text":
            text = f"text matching {self.pattern}"
        elif self.kind == "pair":
            text = f"[low, high] with {_num(self.lo)} <= low <= high <= {_num(self.hi)}"
        elif self.lo is not None and self.lo == self.hi:
            text = f"{_num(self.lo)} only"
        else:
            lb = ("(" if self.lo_open else "[") + (_num(self.lo) if self.lo is not None else "-inf")
            ub = (_num(self.hi) if self.hi is not None else "inf") + (")" if self.hi_open else "]")
            text = f"{'integer' if self.kind == 'int' else 'number'} in {lb}, {ub}"
        if self.optional:
            text += " or null"
        return text + (f" ({self.why})" if self.why else "")

    def check(self, name: str, v) -> None:
        if v is None and self.optional:
            return
        if self.kind == "custom":
            self.fn(name, v)
            return
        ok = self._ok(v)
        if not ok:
            raise ConfigError(f"{name}: {_show(v)} is invalid; valid: {self.valid()}")

    def _ok(self, v) -> bool:
        if self.kind == "bool":
            return isinstance(v, bool)
        if self.kind == "choice":
            return v in self.options
        if self.kind == "text":
            return isinstance(v, str) and re.fullmatch(self.pattern, v) is not None
        if self.kind == "pair":
            vals = list(v) if isinstance(v, (list, tuple)) or OmegaConf.is_list(v) else None
            return (vals is not None and len(vals) == 2 and all(_is_number(x) for x in vals)
                    and self.lo <= vals[0] <= vals[1] <= self.hi)
        if self.kind == "int" and not (isinstance(v, int) and not isinstance(v, bool)):
            return False
        if not _is_number(v):
            return False
        if self.lo is not None and not (v > self.lo if self.lo_open else v >= self.lo):
            return False
        return self.hi is None or (v < self.hi if self.hi_open else v <= self.hi)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _num(x) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) >= 10_000:
        x = int(x)
    return f"{x:,}" if isinstance(x, int) and abs(x) >= 10_000 else str(x)


def _show(v) -> str:
    if OmegaConf.is_config(v):
        v = OmegaConf.to_container(v)
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def INT(lo=None, hi=None, **kw) -> Rule:
    return Rule("int", lo, hi, **kw)


def NUM(lo=None, hi=None, **kw) -> Rule:
    return Rule("float", lo, hi, **kw)


def PAIR(lo, hi, **kw) -> Rule:
    return Rule("pair", lo, hi, **kw)


def CHOICE(*options, **kw) -> Rule:
    return Rule("choice", options=tuple(options), **kw)


def TEXT(pattern: str, **kw) -> Rule:
    return Rule("text", pattern=pattern, **kw)


def CUSTOM(fn, **kw) -> Rule:
    return Rule("custom", fn=fn, **kw)


FLAG = Rule("bool")
COEF = NUM(-5, 5, why="an effect on standardised scales")
SD = NUM(0, 10, lo_open=True, why="a standard deviation")
NAME = TEXT(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", why="letters, digits, '.', '_', '-'; it names a folder")


def _check_biases(name: str, v) -> None:
    vals = list(v) if OmegaConf.is_list(v) or isinstance(v, (list, tuple)) else None
    if vals is None:
        raise ConfigError(f"{name}: {_show(v)} is invalid; valid: a list of {', '.join(BIASES)}")
    for b in vals:
        _need(b in BIASES, f"{name}: unknown bias {b!r}; valid: {', '.join(BIASES)}")
    _need(len(set(vals)) == len(vals), f"{name}: {vals!r} lists a bias twice; valid: each of {', '.join(BIASES)} at most once")


def _check_test_leaks(name: str, v) -> None:
    vals = list(v) if OmegaConf.is_list(v) or isinstance(v, (list, tuple)) else None
    if vals is None:
        raise ConfigError(f"{name}: {_show(v)} is invalid; valid: a list of {', '.join(TEST_LEAKS)} (test-only)")
    for b in vals:
        _need(b in TEST_LEAKS, f"{name}: unknown leak {b!r}; valid: {', '.join(TEST_LEAKS)}")
    _need(len(set(vals)) == len(vals), f"{name}: {vals!r} lists a leak twice; valid: each of {', '.join(TEST_LEAKS)} at most once")


def _check_af_beta(name: str, v) -> None:
    vals = list(v) if OmegaConf.is_list(v) or isinstance(v, (list, tuple)) else []
    _need(len(vals) == 2 and all(_is_number(x) and 0 < x <= 1000 for x in vals),
          f"{name}: {_show(v)} is invalid; valid: [a, b] with 0 < a, b <= 1000 (Beta shape parameters)")


def _check_seed_text(name: str, v) -> None:
    _need(isinstance(v, (str, int)) and not isinstance(v, bool),
          f"{name}: {type(v).__name__} is not a seed; valid: a 0x-prefixed hex string of at least 32 hex digits, or null")


def _check_out(name: str, v) -> None:
    _need(isinstance(v, str) and v.strip() != "",
          f"{name}: {_show(v)} is empty; valid: a local folder or fsspec URL such as ./worlds or s3://bucket/worlds")
    _need(v == v.strip() and "\n" not in v, f"{name}: {_show(v)} has surrounding whitespace; valid: a path or URL without it")


def _check_memory_limit(name: str, v) -> None:
    memory_limit_bytes(v, name=name)


def _check_address(name: str, v) -> None:
    _need(isinstance(v, str) and re.fullmatch(r"[a-z][a-z0-9+.-]*://\S+", v) is not None,
          f"{name}: {_show(v)} is invalid; valid: a scheduler URL such as tcp://host:8786")


def _check_dashboard(name: str, v) -> None:
    _need(isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9.\-\[\]:]*:\d{1,5}", v) is not None and int(v.rsplit(":", 1)[1]) < 65536,
          f"{name}: {_show(v)} is invalid; valid: host:port or :port (0 picks a free port), or null for no dashboard")


def _parquet_rules():
    # The writer's encoding is fixed (writers/release/parquet.py): these fields
    # exist so that sealed/world.yaml records it; any other value would be ignored.
    from .writers.release.parquet import COMPRESSION, COMPRESSION_LEVEL

    fixed = "the release's Parquet encoding is fixed by writers/release/parquet.py"
    return CHOICE(COMPRESSION, why=fixed), INT(COMPRESSION_LEVEL, COMPRESSION_LEVEL, why=fixed)


FIELD_RULES: dict = {
    # ---- scale: sizes, bounded by what the identifiers and formats can hold
    "scale.name": TEXT(r"[a-z0-9_-]{1,32}", why="a scale name in the release manifest"),
    "scale.participants": INT(200, _INT32_MAX, why="htslib and the genotype store index samples with 32-bit integers"),
    "scale.imaged": INT(1, _INT32_MAX),
    "scale.proteins": INT(1, 10_000, why="PROT_xxxx identifiers have four digits"),
    "scale.variants": INT(64, _INT32_MAX, why="at least 64 for 22 chromosomes"),
    "scale.metabolites": INT(1, 10_000, why="MET_xxxx identifiers have four digits"),
    # ---- world: identity and architecture
    "world.id": NAME,
    "world.seed": CUSTOM(_check_seed_text, optional=True, why="a 0x-prefixed hex string of at least 32 hex digits, or null"),
    "world.archetype": CHOICE(*ARCHETYPES),
    "world.hard": FLAG,
    "world.messy": FLAG,
    "world.n_drivers": INT(0, 6),
    "world.biases": CUSTOM(_check_biases, why=f"a list of distinct biases from {', '.join(BIASES)}"),
    "world.driver_weight": PAIR(0.0, 5.0),
    "world.cis_h2": PAIR(0.0, 0.9),
    "world.cis_h2_weak": PAIR(0.0, 0.9),
    "world.cis_h2_weak_fraction": NUM(0, 1, why="share of proteins in the weak h2 component"),
    "world.test_leaks": CUSTOM(_check_test_leaks, why=f"test-only: a list of distinct leaks from {', '.join(TEST_LEAKS)}"),
    "world.af_beta": CUSTOM(_check_af_beta, why="[a, b] with 0 < a, b <= 1000 (Beta shape parameters)"),
    "world.ld_decay_kb": NUM(0, 1e6, lo_open=True),
    "world.trans_fraction": NUM(0, 1),
    "world.n_factors": INT(1, 64),
    "world.factor_loading_sd": NUM(0, 1),
    "world.concordance": PAIR(0.0, 1.0),
    "world.protein_missing": NUM(0, 0.5, hi_open=True),
    "world.latent_residual": SD,
    "world.morphology_residual": NUM(0, 5, why="a standard deviation"),
    "world.visit2_fraction": NUM(0, 1, lo_open=True, why="visit-2 fraction"),
    "world.visit2_years": NUM(0, 50, lo_open=True, why="and below world.followup_years"),
    "world.eval_fraction": NUM(0, 1, lo_open=True),
    "world.followup_years": NUM(5, 50, lo_open=True),
    "world.n_centres": INT(2, 10),
    "world.roles_salt": TEXT(r"[A-Za-z0-9._-]{1,64}", optional=True),
    # ---- world.bias_params: the supplement's coefficients (SPEC section 4)
    "world.bias_params.T1.bmi_loading": COEF,
    "world.bias_params.T1.residual": SD,
    "world.bias_params.T2.latent_loading": COEF,
    "world.bias_params.T2.residual": SD,
    "world.bias_params.T3.eta": COEF,
    "world.bias_params.T3.age": COEF,
    "world.bias_params.T3.bmi": COEF,
    "world.bias_params.T3.latent": COEF,
    "world.bias_params.T3.protein": COEF,
    "world.bias_params.T3.noise": SD,
    "world.bias_params.T4.shared": FLAG,
    "world.bias_params.T5.amplitude": NUM(0, 0.5),
    "world.bias_params.T5.n_terms": INT(1, 11, why="the site field's basis has 11 terms"),
    "world.bias_params.T6.edv": COEF,
    "world.bias_params.T6.esv": COEF,
    "world.bias_params.T7.direct": COEF,
    "world.bias_params.T8.hazard": COEF,
    "world.bias_params.T8.imaging": NUM(0, 5, why="scale of the surrogate's imaging effect (0 = none)"),
    "world.bias_params.T9.scale": NUM(0, 10, lo_open=True, why="the site's reporting scale"),
    "world.bias_params.T9.offset": NUM(-10, 10),
    "world.bias_params.T9.site_age_shift": NUM(-20, 20, why="years"),
    "world.bias_params.T9.site_bmi_shift": NUM(-10, 10, why="kg/m2"),
    "world.bias_params.T9.site_smoking_logodds": COEF,
    "world.bias_params.A9.late_ratio": PAIR(0.0, 10.0),
    "world.bias_params.A9.base_fraction": PAIR(0.0, 1.0),
    "world.bias_params.A9.partner_latent": COEF,
    "world.bias_params.A9.partner_residual": SD,
    "world.bias_params.A9.driver_h2": NUM(0, 0.9),
    "world.bias_params.hard.saturation": NUM(0, 10, lo_open=True),
    "world.bias_params.hard.interaction": COEF,
    "world.bias_params.hard.polygenic_sd": NUM(0, 5),
    "world.bias_params.hard.polygenic_variants": INT(1, 100_000),
    "world.bias_params.hard.residual": SD,
    "world.bias_params.messy.sentinel_rate": NUM(0, 0.2),
    "world.bias_params.messy.protein_missing_base": NUM(0, 0.5, lo_open=True, why="a probability; its log-odds is used"),
    "world.bias_params.messy.protein_missing_bmi": COEF,
    "world.bias_params.messy.implausible_rate": NUM(0, 0.1),
    "world.bias_params.messy.mixed_unit_fraction": NUM(0, 1),
    # ---- cluster: where it runs (never changes an output byte)
    "cluster.kind": CHOICE(*CLUSTER_KINDS),
    "cluster.address": CUSTOM(_check_address, optional=True, why="a scheduler URL such as tcp://host:8786, or null"),
    "cluster.n_workers": INT(1, 1024, optional=True, why="null = one per core"),
    "cluster.threads_per_worker": INT(1, 256),
    "cluster.memory_limit": CUSTOM(_check_memory_limit, why="auto, a fraction of the machine's memory, or a size such as 4GiB"),
    "cluster.chunk_blocks": INT(1, 100_000),
    "cluster.progress": FLAG,
    "cluster.dashboard_address": CUSTOM(_check_dashboard, optional=True, why="host:port or :port, or null for no dashboard"),
    # ---- release: what the bundle holds
    "release.imaging": CHOICE(*IMAGING_LAYOUTS),
    "release.visit2_imaging": FLAG,
    "release.angiograms": INT(0, 0, why="angiogram rendering is not implemented yet"),
    "release.vcf": FLAG,
    "release.genotype_zarr": FLAG,
    "release.parquet_compression": None,  # filled from the writer's constants below
    "release.parquet_compression_level": None,
    # ---- the rest
    "oracle.paper_compat": FLAG,
    "oracle.realism": FLAG,
    "out": CUSTOM(_check_out, why="a local folder or fsspec URL"),
    "seeds": TEXT(r"\S(.*\S)?", optional=True, why="a path or fsspec URL of a sealed seed file"),
    "paper_compat": FLAG,
}
FIELD_RULES["release.parquet_compression"], FIELD_RULES["release.parquet_compression_level"] = _parquet_rules()

PANEL_FIELD_RULES: dict = {
    "panel.id": NAME,
    "panel.worlds": CUSTOM(lambda name, v: _need(
        (OmegaConf.is_list(v) or isinstance(v, (list, tuple))) and len(v) > 0 and all(isinstance(w, str) for w in v),
        f"{name}: {_show(v)} is invalid; valid: a non-empty list of world ids"), why="a non-empty list of world ids"),
    "jobs": INT(1, 64, why="client threads driving world builds"),
}


def memory_limit_bytes(value, total: Optional[int] = None, threads: int = 1, cores: Optional[int] = None,
                       name: str = "cluster.memory_limit") -> Optional[int]:
    """Bytes per worker for ``cluster.memory_limit``, read as distributed reads it:
    ``auto`` (the machine's memory times threads per worker / cores), a number
    up to 1 (a fraction of the machine's memory), a larger number (bytes), a size
    such as ``4GiB``, or ``0`` (no limit: returns None).  ``total`` and
    ``cores`` default to this machine's."""
    import os

    from dask.utils import parse_bytes

    bad = (f"{name}: {_show(value)} is not a memory size; valid: auto, a fraction of the machine's memory in (0, 1], "
           "a size such as 4GiB or 4000MB, or 0 for no limit")
    text = str(value).strip().lower() if value is not None else "0"
    if total is None:
        import psutil

        total = int(psutil.virtual_memory().total)
    if text == "auto":
        return int(total * min(1.0, threads / max(1, cores or os.cpu_count() or 1)))
    try:
        x = float(text)
    except ValueError:
        x = None
    if x is not None:
        _need(math.isfinite(x) and 0 <= x, bad)
        if x == 0:
            return None
        if x <= 1:
            return int(total * x)
        return int(x)
    try:
        nbytes = parse_bytes(text)
    except (ValueError, TypeError):
        raise ConfigError(bad) from None
    _need(nbytes > 0, bad)
    return int(nbytes)


def schema_leaves(cls=None, prefix: str = "") -> list[str]:
    """Dotted names of every leaf field of a schema dataclass (RootConfig by default)."""
    import typing

    cls = cls or RootConfig
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        if dataclasses.is_dataclass(t):
            out += schema_leaves(t, f"{prefix}{f.name}.")
        else:
            out.append(prefix + f.name)
    return out


def _schema_fields(path: str, cls=None) -> Optional[dict]:
    """Field name -> type of the dataclass node at ``path`` ("" is the root)."""
    import typing

    cls = cls or RootConfig
    for part in [p for p in path.split(".") if p]:
        hints = typing.get_type_hints(cls)
        t = hints.get(part)
        if t is None or not dataclasses.is_dataclass(t):
            return None
        cls = t
    return typing.get_type_hints(cls)


def _valid_fields(path: str) -> str:
    fields = _schema_fields(path)
    if fields is None:
        return "the fields of the schema in pipeline/config.py"
    return ", ".join(fields)


def _field_type(name: str) -> str:
    rule = FIELD_RULES.get(name) or PANEL_FIELD_RULES.get(name)
    return rule.valid() if rule is not None else ""


def _check_keys(node, cls, prefix: str) -> None:
    """Reject keys the schema does not have (``+key=value`` additions included)
    and fields that were deleted (``~key``)."""
    import typing

    hints = typing.get_type_hints(cls)
    keys = list(node.keys())
    for key in keys:
        if key not in hints:
            raise ConfigError(f"{prefix}{key}: no such field; valid: {', '.join(hints)}")
    for name, t in hints.items():
        if name not in keys:
            raise ConfigError(f"{prefix}{name}: missing; valid: a value for every field of {cls.__name__}")
        if dataclasses.is_dataclass(t) and not OmegaConf.is_missing(node, name):
            child = node[name]
            _need(OmegaConf.is_dict(child), f"{prefix}{name}: {_show(child)} is invalid; valid: a {t.__name__} mapping")
            _check_keys(child, t, f"{prefix}{name}.")


def check_fields(cfg, rules: dict = FIELD_RULES) -> None:
    """Apply the rule of every field (MISSING values are reported as such)."""
    for name, rule in rules.items():
        if OmegaConf.is_missing(cfg, name):
            raise ConfigError(f"{name}: no value; valid: {rule.valid() or 'a value'}")
        rule.check(name, OmegaConf.select(cfg, name))


# --------------------------------------------------------------------------- validate


@dataclass(frozen=True)
class Resolved:
    """A validated, frozen configuration ready to build."""

    cfg: Any  # OmegaConf DictConfig (read-only)
    seed: int

    @property
    def world(self):
        return self.cfg.world

    @property
    def scale(self):
        return self.cfg.scale


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise ConfigError(msg)


def roles_needed(world) -> int:
    """Proteins needed by the world's roles (drivers, decoys, partners, surrogate)."""
    biases = set(world.biases)
    n = int(world.n_drivers)
    n += sum(1 for b in DECOY_MECHANISM if b in biases)
    n += int("T4" in biases) + int("A9" in biases) + int("T8" in biases)
    return n


def validate(cfg, seed_file_text: Optional[str] = None) -> Resolved:
    """Check every field before any compute; return a frozen resolved config."""
    from .seeds import SeedError, parse_seed

    if OmegaConf.is_missing(cfg, "world"):
        raise ConfigError(f"world: none chosen; valid: world=<id> with <id> one of {', '.join(group_options('world'))}")
    _check_keys(cfg, RootConfig, "")
    check_fields(cfg)
    w, s, c = cfg.world, cfg.scale, cfg.cluster
    frac = s.imaged / s.participants
    _need(0 < frac <= 1, f"scale.imaged: {s.imaged} participants imaged of {s.participants} is a fraction of {frac:.3g}; valid: imaged fraction in (0, 1]")
    _need(w.n_drivers <= s.proteins, f"world.n_drivers: {w.n_drivers} drivers but scale.proteins is {s.proteins}; valid: n_drivers <= proteins")
    need = roles_needed(w)
    _need(need <= s.proteins, f"world.biases: the world's roles need {need} proteins but scale.proteins is {s.proteins}; valid: proteins >= {need}")
    if w.n_drivers == 0:
        for b in ("T4", "A9"):
            _need(b not in w.biases, f"world.biases: {b} pairs a causal driver with a partner but world.n_drivers is 0; valid: remove {b} or set n_drivers >= 1")
    if "A9" in w.biases:
        _need(w.n_drivers >= 2, f"world.n_drivers: {w.n_drivers} with A9; valid: >= 2 (the delayed driver's late weight is scaled to the largest other driver)")
    _need(w.visit2_years < w.followup_years,
          f"world.visit2_years: {w.visit2_years} is not before the end of follow-up ({w.followup_years} years); valid: visit2_years < world.followup_years")
    if c.kind == "address":
        _need(c.address is not None, "cluster.address: null with cluster.kind=address; valid: a scheduler URL such as tcp://host:8786")

    seed_value = w.seed
    field_name = "world.seed"
    if seed_value is None:
        field_name = f"seeds[{w.id}]"
        if seed_file_text is None:
            raise ConfigError(f"world.seed: world {w.id!r} carries no seed (held-out); valid: pass seeds=<path or URL> to a sealed seed file")
        seed_value = _lookup_seed(seed_file_text, w.id)
    try:
        seed = parse_seed(seed_value, field_name)
    except SeedError as exc:
        raise ConfigError(str(exc)) from None
    OmegaConf.set_readonly(cfg, True)
    return Resolved(cfg=cfg, seed=seed)


def validate_panel(cfg) -> list[str]:
    """Check a panel config's own fields; return its world ids."""
    _need(not OmegaConf.is_missing(cfg, "panel"),
          f"panel: none chosen; valid: panel=<id> with <id> one of {', '.join(group_options('panel'))}")
    _check_keys(cfg, PanelAppConfig, "")
    check_fields(cfg, PANEL_FIELD_RULES)
    worlds, known = [str(w) for w in cfg.panel.worlds], group_options("world")
    for w in worlds:
        _need(w in known, f"panel.worlds: unknown world {w!r}; valid: {', '.join(known)}")
    _need(len(set(worlds)) == len(worlds), f"panel.worlds: {worlds!r} lists a world twice; valid: each world once")
    return worlds


def _lookup_seed(text: str, world_id: str):
    import yaml

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        raise ConfigError("seeds: the seed file is not YAML; valid: lines of world-id: '0x...'") from None
    if isinstance(data, dict) and "seeds" in data and isinstance(data["seeds"], dict):
        data = data["seeds"]
    if not isinstance(data, dict) or world_id not in data:
        raise ConfigError(f"seeds: the seed file has no entry for world {world_id!r}; valid: a mapping of world id to seed")
    return data[world_id]


def read_seed_file(url: Optional[str]) -> Optional[str]:
    if not url:
        return None
    import fsspec

    from .preflight import filesystem_class

    filesystem_class(url, field="seeds")
    try:
        with fsspec.open(url, "rt") as fh:
            return fh.read()
    except FileNotFoundError:
        raise ConfigError(f"seeds: {url!r} does not exist; valid: a readable path or fsspec URL of a seed file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"seeds: {url!r} cannot be read ({type(exc).__name__}); valid: a readable text file of world id: seed lines") from None


def load(overrides: list[str] | None = None) -> Resolved:
    cfg = compose(overrides)
    return validate(cfg, read_seed_file(cfg.seeds))


def to_plain(cfg) -> dict:
    return OmegaConf.to_container(cfg, resolve=True)


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def dataclass_defaults(cls) -> dict:
    return dataclasses.asdict(cls())
