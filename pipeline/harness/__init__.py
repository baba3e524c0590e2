"""The episode harness: turn loop, sandbox, task instructions and the agent prelude.

    from pipeline.harness import run_episode
    result = run_episode(world_dir, agent, budget=450_000, out=episode_dir)

``runtime.py`` is not imported here: it is the prelude copied into the
sandbox and executed there.
"""
from .episode import BUDGETS, Episode, EpisodeError, default_episode_dir, extract_code, run_episode, zero_score
from .sandbox import Sandbox, SandboxUnavailable, isolation_status

__all__ = [
    "BUDGETS", "Episode", "EpisodeError", "Sandbox", "SandboxUnavailable", "default_episode_dir", "extract_code",
    "isolation_status", "run_episode", "zero_score",
]
