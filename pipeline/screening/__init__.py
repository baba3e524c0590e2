"""Screening worlds (``kind: screening``): the DO Challenge re-created as a generator.

A screening world is a library of molecular conformations (one docked pose per
drug-like molecule, enumerated from a fragment catalogue with RDKit reaction
rules) with a hidden, pose-sensitive score; an agent may learn 10 % of the
scores and submits up to three sets of 0.3 % of the library, scored by their
overlap with the true top 0.1 %.

The kind interface
------------------
The architecture issue's world-kind seam does not exist yet, so this package
is self-contained and today's entry points dispatch to it with one marked
line each (``# [world-kind seam: screening]``).  What a kind supplies, and
where this kind keeps it (:data:`KIND` lists the same as callables):

==================  ==========================================================
config schema       ``config.ScreeningWorldConfig`` (registered as
                    ``world/base_screening_world``), ``config.validate`` ->
                    ``ScreeningResolved`` (``kind == "screening"``)
sampler             ``library.plan`` (rows -> route, synthons), ``pocket.sample_pockets``
stages / tasks      ``stages.shard_task`` (one task per 5,000-row shard on the
                    project's executor), ``stages.warm_up``
build               ``build.build(resolved, executor, progress)`` (init -> shards -> finalise)
release writers     ``writers`` (library.parquet, SDF shards, README), ``build._assemble_library``
sealed writer       ``sealed.write_sealed``; reader ``sealed.read_sealed``
oracle              ``oracle.LabelOracle`` (label budget, submissions, ledger)
scorer              ``score.score_episode`` (CLI: ``pipeline.score``)
harness             ``episode.ScreeningEpisode`` on ``pipeline.harness.sandbox.Sandbox``,
                    prelude ``runtime.py``, prompt ``prompt.py``, agents ``agents.REGISTRY``
validation          ``validate.validate`` (CLI: ``pipeline.validate``)
audit               ``audit.audit`` (CLI: ``pipeline.audit``)
detection           ``episode.is_screening_world(world_dir)``, ``sealed.is_screening_sealed``,
                    ``config.is_screening(cfg)``
==================  ==========================================================
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class WorldKind:
    """Everything kind-specific, for the seam to look up by ``world.kind``."""

    name: str
    register_schema: Callable  # (ConfigStore) -> None
    is_kind: Callable  # (composed cfg) -> bool
    validate: Callable  # (cfg, seed_file_text) -> resolved config
    build: Callable  # (resolved, executor=None, progress=True) -> summary dict
    warm_up: Callable  # () -> None, on every worker before a timed build
    is_world: Callable  # (world_dir) -> bool
    is_sealed: Callable  # (sealed_dir) -> bool
    score_episode: Callable  # (sealed_dir, work_dir, ledger) -> score dict
    episode_main: Callable  # (argv) -> exit code
    validate_main: Callable  # (argv) -> exit code
    audit_main: Callable  # (argv) -> exit code
    agents: Callable  # () -> {name: AgentSpec}


def _lazy(module: str, attr: str) -> Callable:
    def call(*args, **kwargs):
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)(*args, **kwargs)

    call.__name__ = f"{module}.{attr}"
    return call


KIND = WorldKind(
    name="screening",
    register_schema=_lazy("config", "register"),
    is_kind=_lazy("config", "is_screening"),
    validate=_lazy("config", "validate"),
    build=_lazy("build", "build"),
    warm_up=_lazy("stages", "warm_up"),
    is_world=_lazy("episode", "is_screening_world"),
    is_sealed=_lazy("sealed", "is_screening_sealed"),
    score_episode=_lazy("score", "score_episode"),
    episode_main=_lazy("episode", "main"),
    validate_main=_lazy("validate", "main"),
    audit_main=_lazy("audit", "main"),
    agents=lambda: __import__(f"{__name__}.agents", fromlist=["REGISTRY"]).REGISTRY,
)

__all__ = ["KIND", "WorldKind"]
