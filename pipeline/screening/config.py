"""Configuration of a screening world (``kind: screening``).

A screening world's YAML (``conf/world/screening-*.yaml``) starts from the
``base_screening_world`` schema registered here, so Hydra type-checks it like
any other world; ``scale=tiny|small|paper`` sets the library size (10,000 /
100,000 / 1,000,000 conformations) unless ``world.conformations`` is given.
:func:`validate` checks every field before any compute and returns a frozen
:class:`ScreeningResolved`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional

from omegaconf import MISSING, OmegaConf

from ..config_rules import check_kind_config, register_world_schema
from ..config_schema import CHOICE, CUSTOM, INT, NAME, NUM, PAIR, SEED, ConfigError, _need, ruled
from ..config_schema import world_determining as _world_determining

KIND = "screening"
SCALE_CONFORMATIONS = {"tiny": 10_000, "small": 100_000, "paper": 1_000_000}
BLOCK_SIZE = 1000  # conformations per random-number block; fixed forever (changing it changes every world)
SHARD_ROWS = 5000  # conformations per task and per SDF shard (part of the format)
MIN_TOP_K = 100  # floors that keep small worlds meaningful
MIN_SUBMISSION = 300


def _semi_axes(name: str, v) -> None:
    vals = list(v) if OmegaConf.is_list(v) or isinstance(v, (list, tuple)) else []
    ok = len(vals) == 3 and all(isinstance(x, (int, float)) and not isinstance(x, bool) and 2.0 <= x <= 30.0 for x in vals)
    if not ok:
        raise ConfigError(f"{name}: {vals or v!r} is invalid; valid: three lengths in [2, 30] (Å)")


# Each leaf field declares its rule (pipeline.config_schema.ruled); pipeline.config_rules
# derives the kind's FIELD_RULES, error messages and documentation table from them.


@dataclass
class PocketConfig:
    """A hidden pharmacophore pocket in the pocket frame (Å)."""

    #: feature points (donor, acceptor, hydrophobe, aromatic, positive, negative)
    n_points: int = ruled(INT(1, 64, why="feature points of the pocket"), 10)
    #: the cavity's ellipsoid
    semi_axes: List[float] = ruled(CUSTOM(_semi_axes, why="three lengths in [2, 30] (Å)"), factory=lambda: [8.5, 6.0, 4.5])
    #: feature points at this fraction of the axes
    point_depth: List[float] = ruled(PAIR(0.0, 1.0, why="fractions of the semi-axes"), factory=lambda: [0.15, 0.75])
    #: Gaussian width of a feature point (Å)
    point_sigma: List[float] = ruled(PAIR(0.2, 5.0, why="Å"), factory=lambda: [0.9, 1.3])
    point_weight: List[float] = ruled(PAIR(0.0, 10.0), factory=lambda: [0.6, 1.4])
    excluded: int = ruled(INT(0, 1000, why="excluded-volume spheres"), 72)  #: excluded-volume spheres on the cavity wall
    excluded_radius: float = ruled(NUM(0.5, 5.0, why="Å"), 2.2)  #: Å
    excluded_weight: float = ruled(NUM(0.0, 100.0, why="penalty per Å² of overlap"), 0.25)  #: penalty per Å² of overlap
    #: the wall is open where the local z exceeds this fraction of its semi-axis
    opening: float = ruled(NUM(-1.0, 1.0, why="a fraction of the semi-axis"), 0.45)


@dataclass
class DockingConfig:
    """The cheap docking-like placement into the target pocket (kernels.screening.dock)."""

    starts: int = ruled(INT(1, 10_000), 8)  #: random orientations tried
    steps: int = ruled(INT(0, 10_000), 8)  #: greedy refinement steps of the best
    spread: float = ruled(NUM(0, 20, why="Å"), 1.2)  #: Å: SD of the centroid's offset from the pocket centre
    step_angle: float = ruled(NUM(0, 180, why="degrees"), 20.0)  #: degrees
    step_shift: float = ruled(NUM(0, 10, why="Å"), 0.6)  #: Å


@dataclass
class ScoreConfig:
    """How the hidden score combines its parts (each standardised over the library)."""

    #: share of the score's variance in the per-molecule term no model can predict
    hidden_share: float = ruled(NUM(0, 1, hi_open=True, why="1 leaves no structure to find"), 0.70)
    offtargets: int = ruled(INT(0, 8), 3)
    offtarget_weight: float = ruled(NUM(0, 10), 0.45)  #: weight of sum_k softplus(z(off_k) - threshold)
    offtarget_threshold: float = ruled(NUM(-10, 10), 0.5)
    property_weight: float = ruled(NUM(0, 10), 0.30)  #: weight of the property penalty (cLogP, MW, donors)


@dataclass
class ScreeningWorldConfig:
    """One screening world: a library, a hidden target, three off-targets and the rules of the game."""

    id: str = ruled(NAME, MISSING)  #: world identifier (also the output folder name)
    kind: str = ruled(CHOICE(KIND), KIND)
    seed: Optional[str] = ruled(SEED, None)  #: >=128-bit secret; None for held-out worlds (taken from seeds=<file>)
    #: library size; None = the scale's (tiny 10,000, small 100,000, paper 1,000,000)
    conformations: Optional[int] = ruled(INT(1000, 5_000_000, optional=True, why="null = the scale's size"), None)
    #: labels an agent may request
    budget_fraction: float = ruled(NUM(0, 1, lo_open=True, why="share of the library an agent may label"), 0.10)
    #: the top-K is this fraction of the library (at least 100)
    top_fraction: float = ruled(NUM(0, 0.5, lo_open=True), 0.001)
    submission_fraction: float = ruled(NUM(0, 0.5, lo_open=True), 0.003)  #: ids per submission (at least 300)
    max_submissions: int = ruled(INT(1, 100), 3)
    time_limit_hours: float = ruled(NUM(0, 1000, lo_open=True), 10.0)  #: wall clock of a time-limited episode
    pocket: PocketConfig = field(default_factory=PocketConfig)
    offtarget: PocketConfig = field(default_factory=lambda: PocketConfig(n_points=6))
    docking: DockingConfig = field(default_factory=DockingConfig)
    score: ScoreConfig = field(default_factory=ScoreConfig)


#: Every rule of a screening config: the shared scale/cluster/release/... rules and the world's.
FIELD_RULES: dict = register_world_schema(KIND, ScreeningWorldConfig)


def register(cs) -> None:
    """Register the schema in Hydra's ConfigStore (``pipeline.config_schema.register_configs``
    calls this through ``pipeline.kinds``)."""
    cs.store(group="world", name="base_screening_world", node=ScreeningWorldConfig)


@dataclass(frozen=True)
class ScreeningResolved:
    """A validated, frozen screening configuration ready to build."""

    cfg: Any  # OmegaConf DictConfig (read-only)
    seed: int
    kind: str = KIND

    @property
    def world(self):
        return self.cfg.world

    @property
    def scale(self):
        return self.cfg.scale

    @property
    def n(self) -> int:
        return conformations(self.cfg)

    @property
    def sizes(self) -> dict:
        return sizes(self.cfg.world, self.n)


def conformations(cfg) -> int:
    if cfg.world.conformations is not None:
        return int(cfg.world.conformations)
    return SCALE_CONFORMATIONS[str(cfg.scale.name)]


def sizes(world, n: int) -> dict:
    """Budget, top-K and submission size of a library of ``n`` conformations."""
    top_k = max(MIN_TOP_K, int(round(world.top_fraction * n)))
    submission = max(MIN_SUBMISSION, int(round(world.submission_fraction * n)))
    return {"conformations": n, "budget": int(round(world.budget_fraction * n)), "top_k": top_k,
            "submission_size": submission, "max_submissions": int(world.max_submissions)}


def is_screening(cfg) -> bool:
    return OmegaConf.select(cfg, "world.kind", default=None) == KIND


def validate(cfg, seed_file_text: Optional[str] = None) -> ScreeningResolved:
    """Check every field before any compute (one line naming the field, the value and what
    is valid), then the rules that involve several fields; return a frozen config."""
    from ..config import world_seed

    check_kind_config(cfg, KIND)
    w, c = cfg.world, cfg.cluster
    scale = str(cfg.scale.name)
    if w.conformations is None:
        _need(scale in SCALE_CONFORMATIONS,
              f"scale: {scale!r} has no screening size; valid: {', '.join(SCALE_CONFORMATIONS)} (or set world.conformations)")
    n = conformations(cfg)
    s = sizes(w, n)
    _need(s["top_k"] <= s["submission_size"] <= n,
          f"world.submission_fraction: {s['submission_size']} ids per submission with top-K {s['top_k']} of {n}; "
          "valid: top-K <= submission size <= conformations")
    if c.kind == "address":
        _need(c.address is not None, "cluster.address: null with cluster.kind=address; valid: a scheduler URL such as tcp://host:8786")
    seed = world_seed(w, seed_file_text)
    OmegaConf.set_readonly(cfg, True)
    return ScreeningResolved(cfg=cfg, seed=seed)


#: Bytes per conformation of a built world, from a tiny build (10,000 conformations: release
#: 7.3 MB, sealed 1.1 MB); the shard parts and the assembled library.parquet exist together
#: until the library is assembled.
OUT_PER_CONFORMATION = 2 * 732 + 114


def estimate(cfg):
    """The disk a screening build needs at its largest (``pipeline.preflight``; memory is not
    modelled: the client holds a few arrays of n numbers, a task one 5,000-row shard)."""
    from ..preflight import Estimate

    return Estimate(client=0, task=0, output=int(OUT_PER_CONFORMATION * conformations(cfg)))


def world_determining(resolved: ScreeningResolved) -> dict:
    """The config that determines a screening world's bytes (what ``sealed/world.yaml`` records
    and resumption matches): of the shared definition (``pipeline.buildrecord.world_determining``),
    the world with its library size and seed, the scale's name and the release format."""
    doc = _world_determining(resolved.cfg)
    plain = doc["world"]
    plain["conformations"] = resolved.n
    plain["seed"] = hex(resolved.seed)
    return {"world": plain, "scale": str(doc["scale"]["name"]), "release": {"format": "screening/1"}}
