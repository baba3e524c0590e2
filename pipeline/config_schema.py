"""The config schemas: one dataclass per node, registered in Hydra's ConfigStore
(``register_configs``); YAML groups in ``conf/`` are layered on top.

Each leaf field carries its rule (type, range or choices, and why) in its metadata
(:func:`ruled`), declared once beside its default and its doc: ``pipeline.config_rules``
derives ``FIELD_RULES``, the one-line error messages and the documentation table
(``rules_table``) from these declarations.  Which fields determine a world's bytes is
declared here too (``determines_world=False`` on the root's cluster, out and seeds;
:func:`world_determining`).  The validation is in :mod:`pipeline.config`, which
re-exports the schemas."""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any, List, Optional

from omegaconf import MISSING, OmegaConf

from .bundle import PARQUET_COMPRESSION, PARQUET_COMPRESSION_LEVEL

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
TEST_LEAKS = ("transcripts", "communality", "weak_instrument", "cis_sharing", "t8_signs", "t4_separable",
              "trans_hubs", "weak_ld", "pathway_shapes", "visit2_recomputed", "t1_transcript",
              "g_m_only")
CLUSTER_KINDS = ("local", "sync", "address")
IMAGING_LAYOUTS = ("npz", "zarr", "none")
# Participants per random-number block.  Fixed forever: changing it changes every world.
BLOCK_SIZE = 1000


class ConfigError(ValueError):
    """An invalid configuration value; the message is one line naming the field."""


# --------------------------------------------------------------------------- the rules' vocabulary
#
# A rule checks one leaf field; rules that involve two fields (imaged <= participants, the
# roles' proteins) and the seed are checked after the fields, in pipeline.config.validate().

INT32_MAX = 2**31 - 1
#: The metadata keys of a schema field: its rule, and whether it determines the world's bytes.
RULE, DETERMINES_WORLD = "rule", "determines_world"


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


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise ConfigError(msg)


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


def ruled(rule: Rule, default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING,
          determines_world: bool = True) -> Any:
    """A leaf field of a schema with its rule: ``field(default=..., default_factory=...)``
    whose metadata holds ``rule`` (and ``determines_world=False`` for a field that changes
    no byte of a world)."""
    meta = {RULE: rule} if determines_world else {RULE: rule, DETERMINES_WORLD: False}
    return field(default=default, default_factory=factory, metadata=meta)


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


def _check_world_ids(name: str, v) -> None:
    _need((OmegaConf.is_list(v) or isinstance(v, (list, tuple))) and len(v) > 0 and all(isinstance(w, str) for w in v),
          f"{name}: {_show(v)} is invalid; valid: a non-empty list of world ids")


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


FLAG = Rule("bool")
COEF = NUM(-5, 5, why="an effect on standardised scales")
SD = NUM(0, 10, lo_open=True, why="a standard deviation")
NAME = TEXT(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", why="letters, digits, '.', '_', '-'; it names a folder")
#: A world's seed (every kind of world's).
SEED = CUSTOM(_check_seed_text, optional=True, why="a 0x-prefixed hex string of at least 32 hex digits, or null")
# The tables' encoding is fixed (pipeline/bundle.py): these fields exist so that
# sealed/world.yaml records it; any other value would be ignored.
_FIXED = "the release's Parquet encoding is fixed by the bundle contract (pipeline/bundle.py)"


# --------------------------------------------------------------------------- the schemas


@dataclass
class ScaleConfig:
    """Sizes of a world (bounded by what the identifiers and formats can hold).  Only sizes
    differ between scales, never the model."""

    name: str = ruled(TEXT(r"[a-z0-9_-]{1,32}", why="a scale name in the release manifest"), "tiny")
    participants: int = ruled(INT(200, INT32_MAX, why="htslib and the genotype store index samples with 32-bit integers"),
                              1200)  #: cohort size
    imaged: int = ruled(INT(1, INT32_MAX), 240)  #: participants with baseline cardiac MRI (top of the selection score)
    proteins: int = ruled(INT(1, 10_000, why="PROT_xxxx identifiers have four digits"), 300)  #: plasma proteins (each paired with one transcript)
    variants: int = ruled(INT(64, INT32_MAX, why="at least 64 for 22 chromosomes"), 1024)  #: genotyped variants over 22 chromosomes
    metabolites: int = ruled(INT(1, 10_000, why="MET_xxxx identifiers have four digits"), 40)  #: plasma metabolites


@dataclass
class ClusterConfig:
    """Where the Dask graph runs.  None of these fields changes a single output byte."""

    kind: str = ruled(CHOICE(*CLUSTER_KINDS), "local")  #: local (in-process LocalCluster), sync (one thread), address (existing scheduler)
    address: Optional[str] = ruled(CUSTOM(_check_address, optional=True, why="a scheduler URL such as tcp://host:8786, or null"),
                                   None)  #: tcp://host:8786 when kind=address
    n_workers: Optional[int] = ruled(INT(1, 1024, optional=True, why="null = one per core"), None)  #: local worker processes; default = cores
    threads_per_worker: int = ruled(INT(1, 256), 1)
    memory_limit: str = ruled(CUSTOM(_check_memory_limit, why="auto, a fraction of the machine's memory, or a size such as 4GiB"),
                              "auto")  #: per local worker
    chunk_blocks: int = ruled(INT(1, 100_000), 4)  #: participant blocks per Dask task (a chunking choice only)
    progress: bool = ruled(FLAG, True)  #: show per-stage progress on stderr
    dashboard_address: Optional[str] = ruled(
        CUSTOM(_check_dashboard, optional=True, why="host:port or :port, or null for no dashboard"),
        "127.0.0.1:8787")  #: Dask dashboard of a local cluster (host:port; null = none)


@dataclass
class ReleaseConfig:
    """What the release bundle holds and how it is encoded."""

    imaging: str = ruled(CHOICE(*IMAGING_LAYOUTS), "npz")  #: npz (one file per participant), zarr (one store), none (no pixels)
    visit2_imaging: bool = ruled(FLAG, True)  #: repeat MRI for imaged participants who attended visit 2
    angiograms: int = ruled(INT(0, 0, why="angiogram rendering is not implemented yet"),
                            0)  #: coronary angiogram frames for a small random subset (0 = none; not yet rendered)
    vcf: bool = ruled(FLAG, True)
    genotype_zarr: bool = ruled(FLAG, True)
    parquet_compression: str = ruled(CHOICE(PARQUET_COMPRESSION, why=_FIXED), PARQUET_COMPRESSION)
    parquet_compression_level: int = ruled(INT(PARQUET_COMPRESSION_LEVEL, PARQUET_COMPRESSION_LEVEL, why=_FIXED),
                                           PARQUET_COMPRESSION_LEVEL)


# ---- world.bias_params: the supplement's coefficients (SPEC section 4)


@dataclass
class T1Params:
    bmi_loading: float = ruled(COEF, 0.55)  #: decoy = z[ordinary protein + 0.55 z(BMI)], residual sqrt(0.8^2 - 0.55^2)
    residual: float = ruled(SD, 0.8)  #: the supplement's residual, used only by the test_leaks=communality equation


@dataclass
class T2Params:
    latent_loading: float = ruled(COEF, 0.50)  #: decoy = z[ordinary protein + 0.50 L], residual sqrt(0.8^2 - 0.50^2)
    residual: float = ruled(SD, 0.75)  #: the supplement's residual, used only by the test_leaks=communality equation


@dataclass
class T3Params:
    eta: float = ruled(COEF, 1.0)  #: selection score uses 0.55 eta L + 0.55 eta P_sel
    age: float = ruled(COEF, -0.24)
    bmi: float = ruled(COEF, -0.52)
    latent: float = ruled(COEF, 0.55)
    protein: float = ruled(COEF, 0.55)
    noise: float = ruled(SD, 1.35)


@dataclass
class T4Params:
    shared: bool = ruled(FLAG, True)  #: the partner's cis variant is the driver's (false: its own locus; a negative control)


@dataclass
class T5Params:
    amplitude: float = ruled(NUM(0, 0.5), 0.12)  #: SD of the smooth multiplicative site field b_site(u)
    n_terms: int = ruled(INT(1, 11, why="the site field's basis has 11 terms"), 6)  #: number of smooth basis terms in each site's field


@dataclass
class T6Params:
    edv: float = ruled(COEF, 0.22)  #: z(EDV) += 0.22 z(E)
    esv: float = ruled(COEF, -0.12)  #: z(ESV) += -0.12 z(E)


@dataclass
class T7Params:
    direct: float = ruled(COEF, 0.14)  #: the decoy's standardised cis genotype adds 0.14 G to L


@dataclass
class T8Params:
    hazard: float = ruled(COEF, 0.40)  #: + 0.40 P_T8 in the cardiac log-hazard
    #: scale of the imaging effect delta_k = -imaging c_a alpha_a,k (c_a per archetype; 0 = none)
    imaging: float = ruled(NUM(0, 5, why="scale of the surrogate's imaging effect (0 = none)"), 1.0)


@dataclass
class T9Params:
    scale: float = ruled(NUM(0, 10, lo_open=True, why="the site's reporting scale"), 2.2)  #: the site reports the decoy as 2.2 P + 1.1
    offset: float = ruled(NUM(-10, 10), 1.1)
    site_age_shift: float = ruled(NUM(-20, 20, why="years"), 8.0)  #: the site's participants are older (years) ...
    site_bmi_shift: float = ruled(NUM(-10, 10, why="kg/m2"), 3.0)  #: ... heavier (kg/m2) ...
    site_smoking_logodds: float = ruled(COEF, 0.8)  #: ... and smoke more, so its mean L is higher


@dataclass
class A9Params:
    late_ratio: List[float] = ruled(PAIR(0.0, 10.0), factory=lambda: [1.15, 1.45])  #: |w_late| / max other |w|
    base_fraction: List[float] = ruled(PAIR(0.0, 1.0), factory=lambda: [0.04, 0.10])  #: |w_base| / |w_late|
    partner_latent: float = ruled(COEF, 0.50)  #: partner = z[ordinary protein + 0.50 L_late], residual sqrt(0.8^2 - 0.50^2)
    partner_residual: float = ruled(SD, 0.75)  #: the supplement's residual, used only by the test_leaks=communality equation
    #: the delayed driver's fixed h2, used only by test_leaks=weak_instrument (else drawn from cis_h2_weak)
    driver_h2: float = ruled(NUM(0, 0.9), 0.02)


@dataclass
class HardParams:
    saturation: float = ruled(NUM(0, 10, lo_open=True), 1.6)  #: f(P) = 1.6 tanh(P / 1.6)
    interaction: float = ruled(COEF, 0.5)  #: 1/2 min(|w1|,|w2|) P1 P2
    polygenic_sd: float = ruled(NUM(0, 5), 0.25)  #: SD of the polygenic background G_poly
    polygenic_variants: int = ruled(INT(1, 100_000), 200)
    residual: float = ruled(SD, 0.70)


@dataclass
class MessyParams:
    sentinel_rate: float = ruled(NUM(0, 0.2), 0.01)  #: fraction of covariate cells replaced by -1/-3 codes
    protein_missing_base: float = ruled(NUM(0, 0.5, lo_open=True, why="a probability; its log-odds is used"),
                                        0.02)  #: heavier protein missingness
    protein_missing_bmi: float = ruled(COEF, 0.8)  #: log-odds slope of missingness on z(BMI) (not at random)
    implausible_rate: float = ruled(NUM(0, 0.1), 0.001)  #: implausible values in ECG and CT
    #: fraction of metabolomics rows reported in mg/dL instead of mmol/L
    mixed_unit_fraction: float = ruled(NUM(0, 1), 0.3)


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

    id: str = ruled(NAME, MISSING)  #: world identifier (also the output folder name)
    seed: Optional[str] = ruled(SEED, None)  #: >=128-bit secret; None for held-out worlds (taken from seeds=<file>)
    archetype: str = ruled(CHOICE(*ARCHETYPES), "dcm")  #: dcm | hcm | ischemic | hfpef
    hard: bool = ruled(FLAG, False)  #: tanh saturation, driver interaction, polygenic background, residual SD 0.70
    messy: bool = ruled(FLAG, False)  #: sentinel codes, non-random missingness, mixed units, implausible values
    n_drivers: int = ruled(INT(0, 6), 3)  #: causal driver proteins (0 = null world)
    biases: List[str] = ruled(CUSTOM(_check_biases, why=f"a list of distinct biases from {', '.join(BIASES)}"),
                              factory=lambda: ["T5", "T6", "T8"])
    driver_weight: List[float] = ruled(PAIR(0.0, 5.0), factory=lambda: [0.30, 0.45])  #: |w| ~ U(lo, hi)
    #: h2 ~ U(lo, hi) (the mixture's main component)
    cis_h2: List[float] = ruled(PAIR(0.0, 0.9), factory=lambda: [0.03, 0.25])
    #: weak component of the h2 mixture (the A9 driver's)
    cis_h2_weak: List[float] = ruled(PAIR(0.0, 0.9), factory=lambda: [0.01, 0.03])
    #: share of proteins drawing h2 from the weak component
    cis_h2_weak_fraction: float = ruled(NUM(0, 1, why="share of proteins in the weak h2 component"), 0.45)
    #: q = 0.034381 + (0.5 - 0.034381) Beta(a, b)
    af_beta: List[float] = ruled(CUSTOM(_check_af_beta, why="[a, b] with 0 < a, b <= 1000 (Beta shape parameters)"),
                                 factory=lambda: [0.734507, 1.064551])
    #: latent correlation exp(-|dpos| / ld_decay) between variants
    ld_decay_kb: float = ruled(NUM(0, 1e6, lo_open=True), 110.0)
    #: proteins with a trans (master-regulator) effect of sqrt(0.01)
    trans_fraction: float = ruled(NUM(0, 1), 0.20)
    #: of those (drivers aside, whose are always private), the share whose trans variant is their own rather than a shared hub
    trans_private_fraction: float = ruled(
        NUM(0, 1, why="share of trans effects (drivers' aside) from a protein's own trans variant"), 0.30)
    #: far gaps between clusters of linked variants are at least this (a shifted exponential)
    far_gap_min_kb: float = ruled(NUM(0, 1e5, why="smallest far gap between clusters of linked variants"), 550.0)
    #: share of ordinary pathways nobody follows (the others have L's followers: a baseline one where T2 is
    #: planted, a delayed feeder and a late one where A9 is)
    pathway_absent_rate: float = ruled(NUM(0, 1, why="share of ordinary pathways nobody follows"), 0.25)
    #: late followers of a pathway with a delayed feeder ~ U{lo..hi} (L has the A9 partner)
    pathway_late_followers: List[int] = ruled(
        PAIR(0, 10, why="late followers of an ordinary pathway with a delayed feeder"), factory=lambda: [1, 1])
    #: |v| of an ordinary pathway's feeders ~ U(lo, hi) (the drivers': driver_weight)
    pathway_weight: List[float] = ruled(PAIR(0.0, 5.0, why="an ordinary pathway feeder's weight"),
                                        factory=lambda: [0.30, 0.45])
    #: each ordinary pathway's own residual SD ~ U(lo, hi) (L's: 0.55, hard 0.70)
    pathway_residual: List[float] = ruled(PAIR(0.0, 2.0, why="residual SD of an ordinary pathway"),
                                          factory=lambda: [0.05, 1.05])
    #: each ordinary pathway's follower loading ~ U(lo, hi) (the T2 decoy's and A9 partner's: 0.50)
    pathway_loading: List[float] = ruled(
        PAIR(0.0, 0.79, why="an ordinary follower's loading on its pathway (below the 0.8 residual)"),
        factory=lambda: [0.22, 0.78])
    n_factors: int = ruled(INT(1, 64), 12)  #: shared latent biological factors
    factor_loading_sd: float = ruled(NUM(0, 1), 0.15)
    #: protein-transcript concordance ~ U(lo, hi)
    concordance: List[float] = ruled(PAIR(0.0, 1.0), factory=lambda: [0.30, 0.60])
    protein_missing: float = ruled(NUM(0, 0.5, hi_open=True), 0.004146)
    latent_residual: float = ruled(SD, 0.55)  #: residual SD of L (hard worlds use bias_params.hard.residual)
    #: SD of the oracle's shared morphology residual
    morphology_residual: float = ruled(NUM(0, 5, why="a standard deviation"), 0.35)
    visit2_fraction: float = ruled(NUM(0, 1, lo_open=True, why="visit-2 fraction"), 0.20)
    visit2_years: float = ruled(NUM(0, 50, lo_open=True, why="and below world.followup_years"), 5.0)
    eval_fraction: float = ruled(NUM(0, 1, lo_open=True), 0.20)
    followup_years: float = ruled(NUM(5, 50, lo_open=True), 12.0)
    n_centres: int = ruled(INT(2, 10), 10)
    #: re-deal the roles over protein identifiers (leak audit); None = the seed's own deal
    roles_salt: Optional[str] = ruled(TEXT(r"[A-Za-z0-9._-]{1,64}", optional=True), None)
    bias_params: BiasParams = field(default_factory=BiasParams)
    #: TEST-ONLY, never in a benchmark world: names from TEST_LEAKS, each restoring one
    #: role tell of the pre-issue-12 generator (transcripts mixed before the bias
    #: equations, bias equations without factors and covariates, the A9 driver's fixed
    #: weakest instrument, unconstrained cis loci, DCM-fixed surrogate imaging signs, a
    #: T4 pair separable by association) so the tell scan can be shown to catch it.
    test_leaks: List[str] = ruled(
        CUSTOM(_check_test_leaks, why=f"test-only: a list of distinct leaks from {', '.join(TEST_LEAKS)}"), factory=list)


@dataclass
class OracleConfig:
    paper_compat: bool = ruled(FLAG, False)  #: cell perturbation returns surv5y as the paper's harness did
    realism: bool = ruled(FLAG, False)  #: assay noise and small off-target effects on otherwise-null proteins


@dataclass
class RootConfig:
    # Any, not WorldConfig: each world file names its kind's schema in its defaults list
    # (base_world for a biobank world), which types the node (pipeline.kinds).
    world: Any = MISSING
    scale: ScaleConfig = MISSING
    #: where it runs: never changes a byte of a world
    cluster: ClusterConfig = field(default=MISSING, metadata={DETERMINES_WORLD: False})
    release: ReleaseConfig = MISSING
    oracle: OracleConfig = field(default_factory=OracleConfig)
    #: local path or fsspec URL
    out: str = ruled(CUSTOM(_check_out, why="a local folder or fsspec URL"), "./worlds", determines_world=False)
    #: sealed seed file (YAML/JSON mapping world id -> seed) for held-out worlds
    seeds: Optional[str] = ruled(TEXT(r"\S(.*\S)?", optional=True, why="a path or fsspec URL of a sealed seed file"), None,
                                 determines_world=False)
    paper_compat: bool = ruled(FLAG, False)  #: restore every defect of the original (SPEC section 9)


@dataclass
class PanelConfig:
    id: str = ruled(NAME, MISSING)
    #: world ids, each a file of conf/world/
    worlds: List[str] = ruled(CUSTOM(_check_world_ids, why="a non-empty list of world ids"), MISSING)


@dataclass
class PanelAppConfig(RootConfig):
    """``python -m pipeline.panel``: every world of ``panel`` with the same scale,
    cluster, release and output (``world`` stays unset: the panel names them)."""

    panel: PanelConfig = MISSING
    jobs: int = ruled(INT(1, 64, why="client threads driving world builds"), 4)  #: client threads driving world builds at once on the shared cluster


def world_determining(cfg) -> dict:
    """The world-determining config of a composed or resolved config (or of its plain
    ``OmegaConf.to_container(cfg, resolve=True)``), as plain data: every
    field of the root but those declared ``determines_world=False`` (where the build runs,
    ``cluster``; where it is written, ``out`` and the seed file's path ``seeds``), with the
    world's ``seed`` field as the config gives it.  The one definition: sealed/world.yaml
    records it (with the seed), the build record's and the evaluation's digest
    (``pipeline.buildrecord.config_digest``) and resumption are over it."""
    skip = {f.name for f in dataclasses.fields(RootConfig) if f.metadata.get(DETERMINES_WORLD) is False}
    plain = OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else dict(cfg)
    return {k: v for k, v in plain.items() if k not in skip}


#: What the ConfigStore was last filled for: (the store, the other kinds registered then).
#: Storing turns every schema dataclass into an OmegaConf node, about a third of each
#: ``config.load`` (which asks twice), so it is done again only when the store or the set of
#: kinds changes (e.g. a test's toy kind).  Hydra deep-copies a stored node on every load, so
#: a compose never alters what is stored.
_STORED: list = []


def register_configs() -> None:
    from hydra.core.config_store import ConfigStore

    from . import kinds

    cs = ConfigStore.instance()
    others = kinds.others()
    if _STORED and _STORED[0][0] is cs and len(_STORED[0][1]) == len(others) and all(
            a is b for a, b in zip(_STORED[0][1], others)):
        return
    cs.store(name="base_config", node=RootConfig)
    cs.store(name="base_panel_config", node=PanelAppConfig)
    cs.store(group="world", name="base_world", node=WorldConfig)
    cs.store(group="scale", name="base_scale", node=ScaleConfig)
    cs.store(group="cluster", name="base_cluster", node=ClusterConfig)
    cs.store(group="release", name="base_release", node=ReleaseConfig)
    cs.store(group="panel", name="base_panel", node=PanelConfig)
    for kind in others:  # the config nodes of the other kinds of world
        kind.register_schema(cs)
    _STORED[:] = [(cs, list(others))]
