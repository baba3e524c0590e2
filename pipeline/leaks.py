"""The one seam for test-only leaks: named hook points the generator calls, a no-op unless
the world's config names a leak.

Each test-only leak (``world.test_leaks``: the names in ``pipeline.config_schema.TEST_LEAKS``)
restores one role tell or unplanned trap the generator used to have, so that the tell scan,
the leak audit and the instrument check can be shown to catch it.  The generator has no
branch on them: where a step has a leaky variant, it calls

    hook(world.leaks, "point", default)(*args)

which is ``default`` itself when no leak of the world's has an implementation at that
point (every world built for real: ``world.test_leaks=[]``), and otherwise ``default``
wrapped by each such leak's implementation, in ``TEST_LEAKS`` order (a later leak wraps an
earlier one).  An implementation is called as ``impl(default, *args)``: it may call the
default or replace it.

The implementations live in ``pipeline.leak_hooks`` (``IMPLEMENTATIONS``), resolved by that
name the first time a world with a leak reaches a hook point, in whatever process runs the
step: a leak is named in the world's config (hashed into it and kept in the build record),
so a Dask worker, a resumed build and a rebuild from the record all build the same leaky
world, and a world without leaks never imports the implementations.
"""
from __future__ import annotations

import functools
import importlib
from typing import Callable, Iterable

from .config_schema import TEST_LEAKS

#: The module whose import registers every leak's implementations (``register``).
IMPLEMENTATIONS = "pipeline.leak_hooks"

#: The hook points, each where the generator calls ``hook``: what its default does.
POINTS = {
    "instrument_strengths": "pipeline.model.sampler: each protein's cis h2 (the two-component mixture)",
    "trans_structure": "pipeline.model.sampler: which proteins' trans effects are private (every driver's)",
    "coregulated_pairs": "pipeline.model.sampler: the co-regulated pairs and the proteins linked to them",
    "t4_pair": "pipeline.model.sampler: the T4 pair measured as one co-regulated abundance",
    "linkage_bound": "pipeline.model.sampler: r_max, the linkage bound at this n (pipeline.linkage)",
    "loci": "pipeline.model.sampler: the placement of every instrument locus (pipeline.loci.place)",
    "placed_loci": "pipeline.model.sampler: after the placement (nothing to change)",
    "pathway_design": "pipeline.pathways.build: each pathway's shape, residual, loading and covariate terms",
    "anchor_assay_noise": "pipeline.modalities.molecules: what a pathway reads of a co-regulated anchor",
    "visit2_followers": "pipeline.modalities.molecules: the followers' visit-2 values (K_m_late, from baseline)",
    "special_raw": "pipeline.modalities.cohort: the raw value of a protein whose equation a bias replaces",
    "special_eps": "pipeline.modalities.cohort: the own residual draw of a bias equation",
    "special_transcript": "pipeline.modalities.cohort: a bias protein's transcript, from its final value",
    "visit2_special_paths": "pipeline.modalities.cohort: the covariate change a planted path stands in for",
    "visit2_special_carry": "pipeline.modalities.cohort: the visit-to-visit carry of a bias equation's residual",
    "t8_loadings": "pipeline.modalities.phenotypes: the T8 surrogate's imaging loadings",
}

#: leak name -> {hook point -> implementation}, filled by ``IMPLEMENTATIONS`` on import.
REGISTRY: dict[str, dict[str, Callable]] = {}


def register(leak: str, point: str) -> Callable[[Callable], Callable]:
    """Decorator: ``impl(default, *args)`` is leak ``leak``'s variant of hook point ``point``."""
    if leak not in TEST_LEAKS:
        raise ValueError(f"unknown leak {leak!r}; valid: {', '.join(TEST_LEAKS)}")
    if point not in POINTS:
        raise ValueError(f"unknown hook point {point!r}; valid: {', '.join(POINTS)}")

    def put(impl: Callable) -> Callable:
        REGISTRY.setdefault(leak, {})[point] = impl
        return impl

    return put


def implementations() -> dict[str, dict[str, Callable]]:
    """Every leak's implementations (importing ``IMPLEMENTATIONS`` once)."""
    importlib.import_module(IMPLEMENTATIONS)
    return REGISTRY


def hook(active: Iterable[str], point: str, default: Callable) -> Callable:
    """``default``, wrapped by the implementation at ``point`` of each leak in ``active``
    (a world's ``leaks``); ``default`` itself when there is none."""
    if point not in POINTS:
        raise ValueError(f"unknown hook point {point!r}; valid: {', '.join(POINTS)}")
    active = frozenset(active)
    if not active:
        return default
    registry = implementations()
    fn = default
    for leak in TEST_LEAKS:
        impl = registry.get(leak, {}).get(point) if leak in active else None
        if impl is not None:
            fn = functools.partial(impl, fn)
    return fn
