"""The build graph of a biobank world, in the manner of bio2zarr's
init -> encode partitions -> finalise.

    steps       the build's steps, each a function of the build's state
    run         ``build_world``: the steps in order, progress, the build record
    tasks       the task functions the steps submit (core, omics, assemble)
    imaging     the imaging step's tasks (render, write, measure)
    partitions  resumable work partitions (``.wip`` -> renamed -> SHA-256), block groups
    executor    where tasks run (LocalCluster, a scheduler, or in process)
    warmup      every worker's kernels compiled before the timed build
    progress    per-stage progress on stderr and task timings

``pipeline.build`` is the command line in front of it.
"""
from __future__ import annotations

from .run import build_world

__all__ = ["build_world"]
