"""``pipeline.rl.load_environment``: the verifiers environment (``pipeline.frameworks.rl``).

    from pipeline.rl import load_environment
    env = load_environment(kind="biobank", scale="tiny", n_worlds=64, seed_namespace="train", budgets=[450000])

Needs ``pip install 'drugtargetworld[rl]'``; see ``pipeline.frameworks.rl`` for the dataset,
the rollouts and the rubric, and ``pipeline.frameworks.worlds`` for the training seed
namespace and the curriculum's world families.
"""
from __future__ import annotations

from .frameworks.common import ParameterError
from .frameworks.rl import load_environment, reward_of
from .frameworks.worlds import FAMILIES, evaluation_seeds, families, family_id, training_seed

__all__ = ["load_environment", "reward_of", "ParameterError", "FAMILIES", "families", "family_id", "training_seed",
           "evaluation_seeds"]
