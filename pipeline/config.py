"""Configuration: dataclass schemas registered in Hydra's ConfigStore, YAML groups
in ``conf/`` layered on top, and one validation pass that fails before any
compute with a single line naming the field, the bad value and what is valid.

Groups: ``world/`` (one file per world), ``scale/`` (tiny, small, paper,
biobank), ``cluster/`` (local, sync, address), ``release/`` (what the release
holds), ``panel/`` (lists of worlds).  The Hydra *compose* API is used rather
than ``@hydra.main`` so that Hydra never creates a run folder or log files
anywhere near a release.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional

from omegaconf import MISSING, OmegaConf

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"

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
    variants: int = 512  #: genotyped variants over 22 chromosomes
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
    bmi_loading: float = 0.55  #: decoy = z[0.55 z(BMI) + sqrt(h2) G_cis + 0.8 eps]
    residual: float = 0.8


@dataclass
class T2Params:
    latent_loading: float = 0.50  #: decoy = z[0.50 L + sqrt(h2) G_cis + 0.75 eps]
    residual: float = 0.75


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
    edv: float = -0.20  #: surrogate loadings on the standardised imaging traits
    esv: float = -0.30
    wall: float = 0.15


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
    partner_latent: float = 0.50  #: partner = z[0.50 L_late + sqrt(h2) G_cis + 0.75 eps]
    partner_residual: float = 0.75
    driver_h2: float = 0.02  #: the delayed driver's weak cis instrument


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
    cis_h2: List[float] = field(default_factory=lambda: [0.03, 0.25])  #: h2 ~ U(lo, hi)
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


@dataclass
class OracleConfig:
    paper_compat: bool = False  #: cell perturbation returns surv5y as the paper's harness did
    realism: bool = False  #: assay noise and small off-target effects on otherwise-null proteins


@dataclass
class RootConfig:
    # Any, not WorldConfig: each world file picks its kind's schema in its defaults list
    # (base_world or base_screening_world), which types the node.  [world-kind seam]
    world: Any = MISSING
    scale: ScaleConfig = MISSING
    cluster: ClusterConfig = MISSING
    release: ReleaseConfig = MISSING
    oracle: OracleConfig = field(default_factory=OracleConfig)
    out: str = "./worlds"  #: local path or fsspec URL
    seeds: Optional[str] = None  #: sealed seed file (YAML/JSON mapping world id -> seed) for held-out worlds
    paper_compat: bool = False  #: restore every defect of the original (SPEC section 9)


def register_configs() -> None:
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="base_config", node=RootConfig)
    cs.store(group="world", name="base_world", node=WorldConfig)
    cs.store(group="scale", name="base_scale", node=ScaleConfig)
    cs.store(group="cluster", name="base_cluster", node=ClusterConfig)
    cs.store(group="release", name="base_release", node=ReleaseConfig)
    from .screening.config import register as register_screening  # [world-kind seam: screening]

    register_screening(cs)


# --------------------------------------------------------------------------- compose


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def _check_group_overrides(overrides: list[str]) -> None:
    for ov in overrides:
        key, sep, value = ov.partition("=")
        key = key.lstrip("+~")
        if sep and key in ("world", "scale", "cluster", "release", "panel"):
            options = group_options(key)
            if value not in options:
                raise ConfigError(f"{key}: unknown {key} {value!r}; valid: {', '.join(options)}")


def compose(overrides: list[str] | None = None):
    """Compose the root config with command-line style overrides (no run folder)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    overrides = list(overrides or [])
    _check_group_overrides(overrides)
    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = hydra_compose(config_name="config", overrides=overrides)
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
    if "Could not override" in text:
        m = re.search(r"Could not override '([^']+)'", text)
        return f"{m.group(1) if m else '?'}: no such field; valid: the fields of the schema in pipeline/config.py"
    if key:
        return f"{key.group(1)}: {first}"
    return " ".join(text.split())[:400]


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


def _range(field_name: str, value, lo=None, hi=None, lo_open=False, hi_open=False, kind="number") -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and lo is not None:
        ok = value > lo if lo_open else value >= lo
    if ok and hi is not None:
        ok = value < hi if hi_open else value <= hi
    if not ok:
        lb = ("(" if lo_open else "[") + (str(lo) if lo is not None else "-inf")
        ub = (str(hi) if hi is not None else "inf") + (")" if hi_open else "]")
        raise ConfigError(f"{field_name}: {value!r} is out of range; valid: {kind} in {lb}, {ub}")


def _pair(field_name: str, value, lo, hi) -> None:
    _need(
        len(value) == 2 and all(isinstance(v, (int, float)) for v in value) and lo <= value[0] <= value[1] <= hi,
        f"{field_name}: {list(value)!r} is invalid; valid: [low, high] with {lo} <= low <= high <= {hi}",
    )


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

    w, s, c, r = cfg.world, cfg.scale, cfg.cluster, cfg.release
    for name in ("participants", "imaged", "proteins", "variants", "metabolites"):
        v = s[name]
        _need(isinstance(v, int) and v > 0, f"scale.{name}: {v!r} is invalid; valid: a positive integer")
    frac = s.imaged / s.participants
    _need(0 < frac <= 1, f"scale.imaged: {s.imaged} participants imaged of {s.participants} is a fraction of {frac:.3g}; valid: imaged fraction in (0, 1]")
    _need(s.participants >= 200, f"scale.participants: {s.participants} is too small; valid: >= 200")
    _need(s.variants >= 64, f"scale.variants: {s.variants} is too small; valid: >= 64 (22 chromosomes)")
    _need(w.archetype in ARCHETYPES, f"world.archetype: {w.archetype!r} is unknown; valid: {', '.join(ARCHETYPES)}")
    for b in w.biases:
        _need(b in BIASES, f"world.biases: unknown bias {b!r}; valid: {', '.join(BIASES)}")
    _need(len(set(w.biases)) == len(list(w.biases)), f"world.biases: {list(w.biases)!r} lists a bias twice")
    _need(isinstance(w.n_drivers, int) and 0 <= w.n_drivers <= 6, f"world.n_drivers: {w.n_drivers!r} is out of range; valid: integer in [0, 6]")
    _need(w.n_drivers <= s.proteins, f"world.n_drivers: {w.n_drivers} drivers but scale.proteins is {s.proteins}; valid: n_drivers <= proteins")
    need = roles_needed(w)
    _need(need <= s.proteins, f"world.biases: the world's roles need {need} proteins but scale.proteins is {s.proteins}; valid: proteins >= {need}")
    if w.n_drivers == 0:
        for b in ("T4", "A9"):
            _need(b not in w.biases, f"world.biases: {b} pairs a causal driver with a partner but world.n_drivers is 0; valid: remove {b} or set n_drivers >= 1")
    if "A9" in w.biases:
        _need(w.n_drivers >= 2, f"world.n_drivers: {w.n_drivers} with A9; valid: >= 2 (the delayed driver's late weight is scaled to the largest other driver)")
    _pair("world.driver_weight", w.driver_weight, 0.0, 5.0)
    _pair("world.cis_h2", w.cis_h2, 0.0, 0.9)
    _pair("world.concordance", w.concordance, 0.0, 1.0)
    _need(len(w.af_beta) == 2 and all(isinstance(v, (int, float)) and v > 0 for v in w.af_beta),
          f"world.af_beta: {list(w.af_beta)!r} is invalid; valid: [a, b] with a > 0 and b > 0")
    _range("world.ld_decay_kb", w.ld_decay_kb, 0, 1e6, lo_open=True)
    _range("world.trans_fraction", w.trans_fraction, 0, 1)
    _range("world.protein_missing", w.protein_missing, 0, 0.5, hi_open=True)
    _range("world.visit2_fraction", w.visit2_fraction, 0, 1, lo_open=True, kind="visit-2 fraction")
    _range("world.eval_fraction", w.eval_fraction, 0, 1, lo_open=True)
    _range("world.latent_residual", w.latent_residual, 0, 10, lo_open=True)
    _range("world.followup_years", w.followup_years, 5, 50, lo_open=True)
    _range("world.visit2_years", w.visit2_years, 0, w.followup_years, lo_open=True, hi_open=True)
    _need(isinstance(w.n_factors, int) and 1 <= w.n_factors <= 64, f"world.n_factors: {w.n_factors!r}; valid: integer in [1, 64]")
    _need(isinstance(w.n_centres, int) and 2 <= w.n_centres <= 10, f"world.n_centres: {w.n_centres!r}; valid: integer in [2, 10]")
    bp = w.bias_params
    _pair("world.bias_params.A9.late_ratio", bp.A9.late_ratio, 0.0, 10.0)
    _pair("world.bias_params.A9.base_fraction", bp.A9.base_fraction, 0.0, 1.0)
    _range("world.bias_params.T3.eta", bp.T3.eta, -5, 5)
    _range("world.bias_params.T5.amplitude", bp.T5.amplitude, 0, 0.5)
    _range("world.bias_params.hard.residual", bp.hard.residual, 0, 10, lo_open=True)
    _range("world.bias_params.messy.sentinel_rate", bp.messy.sentinel_rate, 0, 0.2)
    _need(c.kind in CLUSTER_KINDS, f"cluster.kind: {c.kind!r} is unknown; valid: {', '.join(CLUSTER_KINDS)}")
    if c.kind == "address":
        _need(bool(c.address) and "://" in str(c.address), f"cluster.address: {c.address!r} is invalid; valid: a scheduler URL such as tcp://host:8786")
    _need(isinstance(c.chunk_blocks, int) and c.chunk_blocks >= 1, f"cluster.chunk_blocks: {c.chunk_blocks!r}; valid: integer >= 1")
    if c.n_workers is not None:
        _need(isinstance(c.n_workers, int) and c.n_workers >= 1, f"cluster.n_workers: {c.n_workers!r}; valid: integer >= 1 or null")
    _need(r.imaging in IMAGING_LAYOUTS, f"release.imaging: {r.imaging!r} is unknown; valid: {', '.join(IMAGING_LAYOUTS)}")
    _need(isinstance(r.angiograms, int) and r.angiograms >= 0, f"release.angiograms: {r.angiograms!r}; valid: integer >= 0")

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


def _lookup_seed(text: str, world_id: str):
    import yaml

    data = yaml.safe_load(text) or {}
    if isinstance(data, dict) and "seeds" in data and isinstance(data["seeds"], dict):
        data = data["seeds"]
    if not isinstance(data, dict) or world_id not in data:
        raise ConfigError(f"seeds: the seed file has no entry for world {world_id!r}; valid: a mapping of world id to seed")
    return data[world_id]


def read_seed_file(url: Optional[str]) -> Optional[str]:
    if not url:
        return None
    import fsspec

    try:
        with fsspec.open(url, "rt") as fh:
            return fh.read()
    except FileNotFoundError:
        raise ConfigError(f"seeds: {url!r} does not exist; valid: a readable path or fsspec URL of a seed file") from None


def load(overrides: list[str] | None = None) -> Resolved:
    cfg = compose(overrides)
    from .screening import config as screening_config  # [world-kind seam: screening]

    if screening_config.is_screening(cfg):
        return screening_config.validate(cfg, read_seed_file(cfg.seeds))
    return validate(cfg, read_seed_file(cfg.seeds))


def to_plain(cfg) -> dict:
    return OmegaConf.to_container(cfg, resolve=True)


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def dataclass_defaults(cls) -> dict:
    return dataclasses.asdict(cls())
