"""Configuration of a screening world (``kind: screening``).

A screening world's YAML (``conf/world/screening-*.yaml``) starts from the
``base_screening_world`` schema registered here, so Hydra type-checks it like
any other world; ``scale=tiny|small|paper`` sets the library size (10,000 /
100,000 / 1,000,000 conformations) unless ``world.conformations`` is given.
:func:`validate` checks every field before any compute and returns a frozen
:class:`ScreeningResolved`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, List, Optional

from omegaconf import MISSING, OmegaConf

KIND = "screening"
SCALE_CONFORMATIONS = {"tiny": 10_000, "small": 100_000, "paper": 1_000_000}
BLOCK_SIZE = 1000  # conformations per random-number block; fixed forever (changing it changes every world)
SHARD_ROWS = 5000  # conformations per task and per SDF shard (part of the format)
MIN_TOP_K = 100  # floors that keep small worlds meaningful
MIN_SUBMISSION = 300


@dataclass
class PocketConfig:
    """A hidden pharmacophore pocket in the pocket frame (Å)."""

    n_points: int = 10  #: feature points (donor, acceptor, hydrophobe, aromatic, positive, negative)
    semi_axes: List[float] = field(default_factory=lambda: [8.5, 6.0, 4.5])  #: the cavity's ellipsoid
    point_depth: List[float] = field(default_factory=lambda: [0.15, 0.75])  #: feature points at this fraction of the axes
    point_sigma: List[float] = field(default_factory=lambda: [0.9, 1.3])  #: Gaussian width of a feature point (Å)
    point_weight: List[float] = field(default_factory=lambda: [0.6, 1.4])
    excluded: int = 72  #: excluded-volume spheres on the cavity wall
    excluded_radius: float = 2.2  #: Å
    excluded_weight: float = 0.25  #: penalty per Å² of overlap
    opening: float = 0.45  #: the wall is open where the local z exceeds this fraction of its semi-axis


@dataclass
class DockingConfig:
    """The cheap docking-like placement into the target pocket (kernels.screening.dock)."""

    starts: int = 8  #: random orientations tried
    steps: int = 8  #: greedy refinement steps of the best
    spread: float = 1.2  #: Å: SD of the centroid's offset from the pocket centre
    step_angle: float = 20.0  #: degrees
    step_shift: float = 0.6  #: Å


@dataclass
class ScoreConfig:
    """How the hidden score combines its parts (each standardised over the library)."""

    hidden_share: float = 0.70  #: share of the score's variance in the per-molecule term no model can predict
    offtargets: int = 3
    offtarget_weight: float = 0.45  #: weight of sum_k softplus(z(off_k) - threshold)
    offtarget_threshold: float = 0.5
    property_weight: float = 0.30  #: weight of the property penalty (cLogP, MW, donors)


@dataclass
class ScreeningWorldConfig:
    """One screening world: a library, a hidden target, three off-targets and the rules of the game."""

    id: str = MISSING  #: world identifier (also the output folder name)
    kind: str = KIND
    seed: Optional[str] = None  #: >=128-bit secret; None for held-out worlds (taken from seeds=<file>)
    conformations: Optional[int] = None  #: library size; None = the scale's (tiny 10,000, small 100,000, paper 1,000,000)
    budget_fraction: float = 0.10  #: labels an agent may request
    top_fraction: float = 0.001  #: the top-K is this fraction of the library (at least 100)
    submission_fraction: float = 0.003  #: ids per submission (at least 300)
    max_submissions: int = 3
    time_limit_hours: float = 10.0  #: wall clock of a time-limited episode
    pocket: PocketConfig = field(default_factory=PocketConfig)
    offtarget: PocketConfig = field(default_factory=lambda: PocketConfig(n_points=6))
    docking: DockingConfig = field(default_factory=DockingConfig)
    score: ScoreConfig = field(default_factory=ScoreConfig)


def register(cs) -> None:
    """Register the schema in Hydra's ConfigStore (called from pipeline.config.register_configs)."""
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


def _need(cond: bool, msg: str) -> None:
    from ..config import ConfigError

    if not cond:
        raise ConfigError(msg)


def _num(name: str, value, lo, hi, lo_open=False, integer=False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > lo if lo_open else value >= lo) and value <= hi and (not integer or float(value).is_integer())
    kind = "integer" if integer else "number"
    _need(ok, f"{name}: {value!r} is out of range; valid: {kind} in {'(' if lo_open else '['}{lo}, {hi}]")


def _pair(name: str, value, lo, hi) -> None:
    _need(len(value) == 2 and all(isinstance(v, (int, float)) for v in value) and lo <= value[0] <= value[1] <= hi,
          f"{name}: {list(value)!r} is invalid; valid: [low, high] with {lo} <= low <= high <= {hi}")


def _pocket(prefix: str, p) -> None:
    _num(f"{prefix}.n_points", p.n_points, 1, 64, integer=True)
    _need(len(p.semi_axes) == 3 and all(isinstance(v, (int, float)) and 2.0 <= v <= 30.0 for v in p.semi_axes),
          f"{prefix}.semi_axes: {list(p.semi_axes)!r} is invalid; valid: three lengths in [2, 30] Å")
    _pair(f"{prefix}.point_depth", p.point_depth, 0.0, 1.0)
    _pair(f"{prefix}.point_sigma", p.point_sigma, 0.2, 5.0)
    _pair(f"{prefix}.point_weight", p.point_weight, 0.0, 10.0)
    _num(f"{prefix}.excluded", p.excluded, 0, 1000, integer=True)
    _num(f"{prefix}.excluded_radius", p.excluded_radius, 0.5, 5.0)
    _num(f"{prefix}.excluded_weight", p.excluded_weight, 0.0, 100.0)
    _num(f"{prefix}.opening", p.opening, -1.0, 1.0)


def validate(cfg, seed_file_text: Optional[str] = None) -> ScreeningResolved:
    """Check every field of a screening config before any compute."""
    from ..config import CLUSTER_KINDS, ConfigError, _lookup_seed
    from ..seeds import SeedError, parse_seed
    from .fragments import ROUTES

    w, c = cfg.world, cfg.cluster
    scale = str(cfg.scale.name)
    if w.conformations is None:
        _need(scale in SCALE_CONFORMATIONS,
              f"scale: {scale!r} has no screening size; valid: {', '.join(SCALE_CONFORMATIONS)} (or set world.conformations)")
    else:
        _num("world.conformations", w.conformations, 1000, 5_000_000, integer=True)
    n = conformations(cfg)
    _need(w.kind == KIND, f"world.kind: {w.kind!r}; valid: {KIND}")
    _num("world.budget_fraction", w.budget_fraction, 0.0, 1.0, lo_open=True)
    _num("world.top_fraction", w.top_fraction, 0.0, 0.5, lo_open=True)
    _num("world.submission_fraction", w.submission_fraction, 0.0, 0.5, lo_open=True)
    _num("world.max_submissions", w.max_submissions, 1, 100, integer=True)
    _num("world.time_limit_hours", w.time_limit_hours, 0.0, 1000.0, lo_open=True)
    s = sizes(w, n)
    _need(s["top_k"] <= s["submission_size"] <= n,
          f"world.submission_fraction: {s['submission_size']} ids per submission with top-K {s['top_k']} of {n}; valid: top-K <= submission size <= conformations")
    _pocket("world.pocket", w.pocket)
    _pocket("world.offtarget", w.offtarget)
    d = w.docking
    _num("world.docking.starts", d.starts, 1, 10_000, integer=True)
    _num("world.docking.steps", d.steps, 0, 10_000, integer=True)
    _num("world.docking.spread", d.spread, 0.0, 20.0)
    _num("world.docking.step_angle", d.step_angle, 0.0, 180.0)
    _num("world.docking.step_shift", d.step_shift, 0.0, 10.0)
    sc = w.score
    _num("world.score.hidden_share", sc.hidden_share, 0.0, 1.0, lo_open=False)
    _need(sc.hidden_share < 1.0, f"world.score.hidden_share: {sc.hidden_share!r}; valid: number in [0, 1) (1 leaves no structure to find)")
    _num("world.score.offtargets", sc.offtargets, 0, 8, integer=True)
    _num("world.score.offtarget_weight", sc.offtarget_weight, 0.0, 10.0)
    _num("world.score.offtarget_threshold", sc.offtarget_threshold, -10.0, 10.0)
    _num("world.score.property_weight", sc.property_weight, 0.0, 10.0)
    _need(c.kind in CLUSTER_KINDS, f"cluster.kind: {c.kind!r} is unknown; valid: {', '.join(CLUSTER_KINDS)}")
    if c.kind == "address":
        _need(bool(c.address) and "://" in str(c.address), f"cluster.address: {c.address!r} is invalid; valid: a scheduler URL such as tcp://host:8786")
    if c.n_workers is not None:
        _need(isinstance(c.n_workers, int) and c.n_workers >= 1, f"cluster.n_workers: {c.n_workers!r}; valid: integer >= 1 or null")
    _need(abs(sum(r.weight for r in ROUTES) - 1.0) < 1e-9, "fragments.ROUTES: route weights do not sum to 1")

    seed_value, field_name = w.seed, "world.seed"
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
    return ScreeningResolved(cfg=cfg, seed=seed)


def world_determining(resolved: ScreeningResolved) -> dict:
    """The config that determines the world's bytes (what ``sealed/world.yaml`` records)."""
    plain = OmegaConf.to_container(resolved.cfg.world, resolve=True)
    plain["conformations"] = resolved.n
    plain["seed"] = hex(resolved.seed)
    return {"world": plain, "scale": str(resolved.cfg.scale.name), "release": {"format": "screening/1"}}
