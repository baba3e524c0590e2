"""Stable names of the episode harness (API v1), on the shared core.

    from pipeline.harness import run_episode
    result = run_episode(world_dir, agent, budget=450_000, out=episode_dir)   # a biobank world
    result = run_episode(screening_world_dir, agent, mode="unrestricted")      # a screening world

Everything lives in ``pipeline.harness.core`` (the turn loop, exit rules, transcript,
score.json; the folders in ``pipeline.harness.folders``) and in each kind's half (``pipeline.harness.biobank``,
``pipeline.screening.episode``); this module keeps the names earlier versions exported.
"""
from __future__ import annotations

from .biobank import BUDGETS, zero_score
from .core import (EPISODE_MARKER, EPISODES_ROOT, MAX_PROGRAM_CHARS, REPLY_CAP, TRANSCRIPT_FORMAT, Session,
                   bounded_reply, default_episode_dir, extract_code, play, prepare_episode_dir, run_episode,
                   world_paths)
from .kind import EpisodeError

DEFAULT_TURNS = 30
DEFAULT_TIMEOUT = 300.0


def default_isolation(agent) -> str:
    """"auto" for the project's own reference agents, "require" for any other code."""
    from ..agents.registry import default_isolation as decide

    return decide(agent)


__all__ = [
    "BUDGETS", "DEFAULT_TIMEOUT", "DEFAULT_TURNS", "EPISODE_MARKER", "EPISODES_ROOT", "EpisodeError",
    "MAX_PROGRAM_CHARS", "REPLY_CAP", "Session", "TRANSCRIPT_FORMAT", "bounded_reply", "default_episode_dir",
    "default_isolation", "extract_code", "play", "prepare_episode_dir", "run_episode", "world_paths", "zero_score",
]
