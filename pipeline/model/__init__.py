"""The hidden world model (Supplementary Methods S1; SPEC section 4), in three parts:

- ``constants``: the model's fixed parameters (data);
- ``world``: ``World`` and ``Roles``, the world-level parameters of one world (frozen data);
- ``sampler``: ``sample_world``, which draws a World from its resolved config and seed.

The participant modalities (``pipeline.modalities``) read the first two; the sampler comes
after them in the stages, since it draws the world's first population blocks to measure the
covariates' moments it hands to the pathway builder (``pipeline.pathways``).  Nothing is
imported here, so that reading the constants or the data loads no sampler.
"""
