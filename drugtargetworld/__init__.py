"""The distribution's own name as an import package: where Inspect and verifiers look for it.

* Inspect names an installed package's tasks after the top-level import package that defines
  them and finds them through the ``inspect_ai`` entry point of that name: the task
  ``drugtargetworld/episode`` lives in ``drugtargetworld.inspect_task``.
* verifiers loads an environment by importing the module named by its id and calling its
  ``load_environment``: ``verifiers.load_environment("drugtargetworld", kind="biobank", ...)``
  (and a trainer's ``env_id = "drugtargetworld"``) is ``pipeline.rl.load_environment``.

Everything else of the project is the package ``pipeline`` (these adapters:
``pipeline.frameworks``).
"""
from __future__ import annotations


def load_environment(**kwargs):
    """``pipeline.rl.load_environment`` (the verifiers environment; needs the ``[rl]`` extra)."""
    from pipeline.frameworks.rl import load_environment as load

    return load(**kwargs)
