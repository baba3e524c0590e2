"""World kinds: the seam between the project's entry points and what is specific to
one kind of world.

A *kind* supplies everything kind-specific: its config schema and validation, the
build (hidden-model sampler, stages, release and sealed writers), the scorer, the
episode harness (tools, prompt, oracle, agents), validation and the audit.  The
entry points (``pipeline.build``, ``pipeline.score``, ``pipeline.audit``,
``pipeline.validate``, ``pipeline.episode`` and the config loader) ask this module
which kind they hold and hand over to it, so a second kind plugs in without touching
the first.

Today's biobank world is the kind :data:`BIOBANK`, and the fallback: a config, world
folder or sealed folder that no other registered kind claims is a biobank one.
Other kinds are registered with :func:`register` (a test's toy kind does) or found
as a package of this project exposing ``KIND`` (``pipeline.screening``, when present).
A kind is any object with the attributes of :class:`WorldKind`.
"""
from __future__ import annotations

import importlib
from dataclasses import MISSING, dataclass, fields
from typing import Any, Callable, Optional

#: Packages of this project that may hold a kind (each exposing ``KIND``); absent ones are skipped.
KIND_PACKAGES = ("pipeline.screening",)
DEFAULT = "biobank"


@dataclass(frozen=True)
class WorldKind:
    """Everything kind-specific, looked up by the entry points."""

    name: str
    register_schema: Callable  # (ConfigStore) -> None: the kind's config nodes
    is_kind: Callable  # (composed cfg) -> bool
    validate: Callable  # (cfg, seed file text or None) -> resolved config (with .cfg)
    build: Callable  # (resolved, executor=None, progress=True) -> summary dict
    warm_up: Callable  # () -> None: on every worker before a timed build
    is_world: Callable  # (world_dir) -> bool
    is_sealed: Callable  # (sealed_dir) -> bool
    score_episode: Callable  # (sealed_dir, work_dir, ledger) -> score dict
    #: (world, release, sealed, world_id) -> pipeline.harness.kind.KindEpisode: the kind's half of an
    #: episode (its tools, prompt, oracle and scorer) for the shared episode core (pipeline.harness.core)
    episode: Callable
    validate_main: Callable  # (argv) -> exit code
    audit_main: Callable  # (argv) -> exit code
    agents: Callable  # () -> {name: pipeline.agents.base.AgentSpec}: the kind's reference agents
    #: (cfg) -> pipeline.preflight.Estimate: the build's memory and disk, checked before any compute
    #: (None: the kind's builds get the checks that need no size model, and no disk check).
    estimate: Optional[Callable] = None


REQUIRED = tuple(f.name for f in fields(WorldKind) if f.default is MISSING)
_REGISTRY: dict[str, Any] = {}
_discovered = False


def lazy(module: str, attr: str) -> Callable:
    """A callable that imports ``module`` on first call: a kind's heavy parts load only when used."""

    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), attr)(*args, **kwargs)

    call.__name__ = f"{module}.{attr}"
    return call


def register(kind: Any) -> Any:
    """Add ``kind`` (an object with every attribute of WorldKind); a missing attribute or a
    name already taken by another kind is an error naming it."""
    missing = [name for name in REQUIRED if not hasattr(kind, name)]
    if missing:
        raise TypeError(f"world kind {getattr(kind, 'name', kind)!r}: missing {', '.join(missing)}; "
                        f"valid: an object with {', '.join(REQUIRED)}")
    if kind.name in _REGISTRY and _REGISTRY[kind.name] is not kind:
        raise ValueError(f"world kind {kind.name!r} is already registered; valid: a new name")
    _REGISTRY[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a registered kind (a test's toy kind, after the test)."""
    if name == DEFAULT:
        raise ValueError(f"world kind {DEFAULT!r} is the fallback and cannot be removed")
    _REGISTRY.pop(name, None)


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True
    for package in KIND_PACKAGES:
        try:
            module = importlib.import_module(package)
        except ModuleNotFoundError as exc:
            if exc.name != package:  # the package is there but something it needs is not
                raise
            continue
        register(module.KIND)


def registered() -> dict[str, Any]:
    """name -> kind, the fallback first."""
    _discover()
    return dict(_REGISTRY)


def others() -> list:
    """Every registered kind but the fallback, in registration order."""
    return [k for name, k in registered().items() if name != DEFAULT]


def _first(test: str, value: Any) -> Any:
    for kind in others():
        if getattr(kind, test)(value):
            return kind
    return _REGISTRY[DEFAULT]


def for_config(cfg: Any) -> Any:
    """The kind of a composed config."""
    return _first("is_kind", cfg)


def for_resolved(resolved: Any) -> Any:
    """The kind of a validated config: its ``kind`` attribute (a biobank Resolved has none)."""
    name = getattr(resolved, "kind", DEFAULT)
    kinds = registered()
    if name not in kinds:
        raise ValueError(f"kind: {name!r} is not a registered world kind; valid: {', '.join(kinds)}")
    return kinds[name]


def for_world(world_dir: Any) -> Any:
    """The kind of a built world's folder (``<out>/<id>`` holding release/ and sealed/)."""
    return _first("is_world", world_dir)


def for_sealed(sealed_dir: Any) -> Any:
    """The kind of a world's sealed/ folder."""
    return _first("is_sealed", sealed_dir)


def _always(_: Any) -> bool:
    return True


def _no_schema(_: Any) -> None:
    """The biobank schemas are the base ones, which pipeline.config registers itself."""


def _biobank_agents() -> dict:
    return importlib.import_module("pipeline.agents").REGISTRY


#: Today's world: a synthetic population biobank with a hidden causal ground truth.
BIOBANK = register(WorldKind(
    name=DEFAULT,
    register_schema=_no_schema,
    is_kind=_always,
    validate=lazy("pipeline.config", "validate"),
    build=lazy("pipeline.graph", "build_world"),
    warm_up=lazy("pipeline.graph.warmup", "warm_up"),
    is_world=_always,
    is_sealed=_always,
    score_episode=lazy("pipeline.score", "score_episode"),
    episode=lazy("pipeline.harness.biobank", "BiobankEpisode"),
    validate_main=lazy("pipeline.validate", "biobank_main"),
    audit_main=lazy("pipeline.audit.cli", "biobank_main"),
    agents=_biobank_agents,
    estimate=lazy("pipeline.preflight", "estimate"),
))
