"""The episode harness: one core for every kind of world, the sandbox, the task instructions.

    from pipeline.harness import run_episode
    result = run_episode(world_dir, agent, budget=450_000, out=episode_dir)

``core`` is the episode (a ``Session`` any driver can play: a policy's turn loop, an MCP
client, Inspect, verifiers); ``kind`` is what a kind of world supplies to it; ``biobank`` is
the biobank kind's half; ``sandbox`` runs each program isolated; ``safeio`` and ``quota``
keep every harness operation on WORK safe and bounded.  ``runtime.py`` is not imported
here: it is the prelude copied into the sandbox and executed there.
"""
from .episode import (BUDGETS, EpisodeError, Session, default_episode_dir, extract_code, play, run_episode,
                      zero_score)
from .sandbox import Sandbox, SandboxUnavailable, isolation_status

__all__ = [
    "BUDGETS", "EpisodeError", "Sandbox", "SandboxUnavailable", "Session", "default_episode_dir", "extract_code",
    "isolation_status", "play", "run_episode", "zero_score",
]
