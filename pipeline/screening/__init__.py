"""Screening worlds (``kind: screening``): the DO Challenge re-created as a generator.

A screening world is a library of molecular conformations (one docked pose per
drug-like molecule, enumerated from a fragment catalogue with RDKit reaction
rules) with a hidden, pose-sensitive score; an agent may learn 10 % of the
scores and submits up to three sets of 0.3 % of the library, scored by their
overlap with the true top 0.1 %.

The kind interface
------------------
This package is a world kind of the seam ``pipeline.kinds`` (listed in its
``KIND_PACKAGES``): :data:`KIND` is a :class:`pipeline.kinds.WorldKind`, and the
project's entry points (``pipeline.build``, ``pipeline.score``,
``pipeline.validate``, ``pipeline.audit``, ``pipeline.episode``, the config
loader) hand a screening config or world to it.  Where each part lives:

==================  ==========================================================
config schema       ``config.ScreeningWorldConfig`` (registered as
                    ``world/base_screening_world``), field rules
                    ``config.FIELD_RULES``, ``config.validate`` ->
                    ``ScreeningResolved`` (``kind == "screening"``)
random streams      ``streams`` (registered in ``pipeline.streams`` with
                    ``world_kind="screening"``)
sampler             ``library.plan`` (rows -> route, synthons), ``pocket.sample_pockets``
stages / tasks      ``stages.shard_task`` (one task per 5,000-row shard on the
                    project's executor), ``stages.warm_up``
build               ``build.build(resolved, executor, progress)`` (init -> shards -> finalise)
release writers     ``writers`` (library.parquet, SDF shards, README), ``build._assemble_library``
sealed writer       ``sealed.write_sealed``
bundle contract     ``bundle`` (file names; readers ``read_sealed``, ``is_screening_world``,
                    ``is_screening_sealed``), on top of ``pipeline.bundle``
oracle              ``oracle.LabelOracle`` (label budget, submissions, ledger)
scorer              ``score.score_episode`` (CLI: ``pipeline.score``)
harness             ``episode.ScreeningEpisode``: the kind's half of an episode on the shared
                    core (``pipeline.harness.core``): tools, prelude ``runtime.py``, prompt
                    ``prompt.py``, oracle; agents ``agents.REGISTRY``
validation          ``validate.validate`` (CLI: ``pipeline.validate``)
audit               ``audit.audit`` (CLI: ``pipeline.audit``)
detection           ``bundle.is_screening_world(world_dir)``, ``bundle.is_screening_sealed``,
                    ``config.is_screening(cfg)``
==================  ==========================================================
"""
from __future__ import annotations

import importlib

from .. import kinds
from . import streams  # noqa: F401  (registers the kind's random streams with pipeline.streams)


def _agents() -> dict:
    # imported when asked for, as every part of the kind (the harness side loads only then)
    return importlib.import_module(f"{__name__}.agents").REGISTRY


def _part(module: str, attr: str):
    return kinds.lazy(f"{__name__}.{module}", attr)


KIND = kinds.WorldKind(
    name="screening",
    register_schema=_part("config", "register"),
    is_kind=_part("config", "is_screening"),
    validate=_part("config", "validate"),
    build=_part("build", "build"),
    warm_up=_part("stages", "warm_up"),
    is_world=_part("bundle", "is_screening_world"),
    is_sealed=_part("bundle", "is_screening_sealed"),
    score_episode=_part("score", "score_episode"),
    episode=_part("episode", "ScreeningEpisode"),
    validate_main=_part("validate", "main"),
    audit_main=_part("audit", "main"),
    agents=_agents,
    estimate=_part("config", "estimate"),
)

__all__ = ["KIND"]
