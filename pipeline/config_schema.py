"""The config schemas: one dataclass per node, registered in Hydra's ConfigStore
(``register_configs``); YAML groups in ``conf/`` are layered on top.  Their
validation is in :mod:`pipeline.config`, which re-exports them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional

from omegaconf import MISSING

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
              "trans_hubs", "weak_ld", "pathway_shapes", "visit2_recomputed")
CLUSTER_KINDS = ("local", "sync", "address")
IMAGING_LAYOUTS = ("npz", "zarr", "none")
# Participants per random-number block.  Fixed forever: changing it changes every world.
BLOCK_SIZE = 1000


class ConfigError(ValueError):
    """An invalid configuration value; the message is one line naming the field."""


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
    cis_h2_weak_fraction: float = 0.45  #: share of proteins drawing h2 from the weak component
    af_beta: List[float] = field(default_factory=lambda: [0.734507, 1.064551])  #: q = 0.034381 + (0.5 - 0.034381) Beta(a, b)
    ld_decay_kb: float = 110.0  #: latent correlation exp(-|dpos| / ld_decay) between variants
    trans_fraction: float = 0.20  #: proteins with a trans (master-regulator) effect of sqrt(0.01)
    trans_private_fraction: float = 0.30  #: of those (drivers aside, whose are always private), the share whose trans variant is their own rather than a shared hub
    far_gap_min_kb: float = 550.0  #: far gaps between clusters of linked variants are at least this (a shifted exponential)
    pathway_absent_rate: float = 0.25  #: share of ordinary pathways nobody follows (the others have L's followers: a baseline one where T2 is planted, a delayed feeder and a late one where A9 is)
    pathway_late_followers: List[int] = field(default_factory=lambda: [1, 1])  #: late followers of a pathway with a delayed feeder ~ U{lo..hi} (L has the A9 partner)
    pathway_weight: List[float] = field(default_factory=lambda: [0.30, 0.45])  #: |v| of an ordinary pathway's feeders ~ U(lo, hi) (the drivers': driver_weight)
    pathway_residual: List[float] = field(default_factory=lambda: [0.05, 1.05])  #: each ordinary pathway's own residual SD ~ U(lo, hi) (L's: 0.55, hard 0.70)
    pathway_loading: List[float] = field(default_factory=lambda: [0.22, 0.78])  #: each ordinary pathway's follower loading ~ U(lo, hi) (the T2 decoy's and A9 partner's: 0.50)
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
    # Any, not WorldConfig: each world file names its kind's schema in its defaults list
    # (base_world for a biobank world), which types the node (pipeline.kinds).
    world: Any = MISSING
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
