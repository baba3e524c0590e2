"""The Inspect task ``drugtargetworld/episode`` under the project's namespace.

The task, its solvers, tools and scorer are defined in ``drugtargetworld.inspect_task`` (Inspect
names an installed package's tasks after the top-level import package that defines them, and
the entry point ``drugtargetworld`` of the group ``inspect_ai`` loads that module); this module
is the same objects, for ``from pipeline.frameworks.inspect_task import episode``.
"""
from __future__ import annotations

from drugtargetworld.inspect_task import (TaskParameterError, episode, episode_agent, episode_scorer,  # noqa: F401
                                          episode_setup, episode_tools, inspect_parameters)

__all__ = ["episode", "episode_setup", "episode_agent", "episode_scorer", "episode_tools", "inspect_parameters",
           "TaskParameterError"]
