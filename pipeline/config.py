"""Configuration: dataclass schemas registered in Hydra's ConfigStore, YAML groups
in ``conf/`` layered on top, and one validation pass that fails before any
compute with a single line naming the field, the bad value and what is valid.

Groups: ``world/`` (one file per world), ``scale/`` (tiny, small, paper,
biobank), ``cluster/`` (local, sync, address), ``release/`` (what the release
holds), ``panel/`` (lists of worlds).  ``conf/config.yaml`` composes one world
(``world`` has no default: a build names its world), ``conf/panel_config.yaml``
a panel.  Both set Hydra to write nothing (no run folder, no ``.hydra`` copy of
the config, no log file); the entry points run as Hydra apps (``pipeline.cli``)
and library callers compose with :func:`load`.

Validation: every leaf field has a rule in ``FIELD_RULES`` (keys the schema does
not have, ``+`` additions included, are refused), then the rules that involve
several fields.  What depends on the machine (memory, disk, the output location,
the scheduler) is checked by ``pipeline.preflight``, also before any compute.
"""
from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any, Optional

from omegaconf import OmegaConf

from .locations import filesystem_class
from .paths import CONF_DIR

# The vocabulary and the schemas (dataclasses registered in the ConfigStore) live in
# config_schema, the field rules in config_rules; this module composes and validates,
# and re-exports them (callers say config.WorldConfig, config.FIELD_RULES, ...).
from .config_schema import (  # noqa: F401
    ARCHETYPES, BIASES, BLOCK_SIZE, CLUSTER_KINDS, ConfigError, DECOY_MECHANISM, IMAGING_LAYOUTS, SCALES,
    TEST_LEAKS, A9Params, BiasParams, ClusterConfig, HardParams, MessyParams, OracleConfig, PanelAppConfig,
    PanelConfig, ReleaseConfig, RootConfig, ScaleConfig, T1Params, T2Params, T3Params, T4Params, T5Params, T6Params,
    T7Params, T8Params, T9Params, WorldConfig, register_configs
)
from .config_rules import (  # noqa: F401
    CHOICE, CUSTOM, FIELD_RULES, INT, NUM, PAIR, PANEL_FIELD_RULES, Rule, TEXT, _check_keys, _field_type, _need, _rule,
    _valid_fields, check_fields, memory_limit_bytes, schema_leaves
)




# --------------------------------------------------------------------------- compose


def group_options(group: str) -> list[str]:
    """The options of a config group: its YAML files, and the nodes other kinds of world
    store in it (``pipeline.kinds``; the base_* schemas are not options)."""
    from hydra.core.config_store import ConfigStore

    register_configs()
    try:
        stored = {n.rsplit(".", 1)[0] for n in ConfigStore.instance().list(group) if not n.startswith("base_")}
    except OSError:  # no node stored in this group
        stored = set()
    return sorted({p.stem for p in (CONF_DIR / group).glob("*.yaml")} | stored)


CONFIG_GROUPS = ("world", "scale", "cluster", "release", "panel")


def parse_overrides(overrides: list[str], multirun: bool = False) -> list:
    """Hydra's own parse of command-line overrides, errors as one line.  Outside
    a multirun a sweep (``world=a,b``) is an error that says to add ``-m``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException as exc:
        raise ConfigError(" ".join(str(exc).split())) from None
    for ov in parsed:
        key = ov.get_key_element()
        if ov.key_or_group.split("/")[0].split(".")[0] == "hydra":
            raise ConfigError(f"{key}: Hydra's own settings are fixed (no run folder, no .hydra copy of the config, no log "
                              "file next to a release); valid: overrides of world, scale, cluster, release, out, seeds")
        if ov.is_sweep_override() and not multirun:
            raise ConfigError(f"{ov.input_line}: a sweep runs one build per value; valid: add -m (--multirun), or give one value")
        if ov.key_or_group in CONFIG_GROUPS and not ov.is_delete() and not ov.is_sweep_override():
            value = ov.value()
            options = group_options(ov.key_or_group)
            if value not in options:
                raise ConfigError(f"{ov.key_or_group}: unknown {ov.key_or_group} {value!r}; valid: {', '.join(options)}")
    return parsed


def check_unique_keys(parsed: list) -> None:
    """A command line names each key once: Hydra would apply ``out=a out=b`` in turn, so
    the last silently wins, and ``world=x world=y`` builds y.  ``parsed``: the overrides
    as :func:`parse_overrides` returns them (``+key``, ``++key`` and ``~key`` are the same
    key as ``key``).  The Python API (:func:`compose`, :func:`load`) keeps Hydra's rule,
    the last wins, for callers that append to a list of overrides."""
    seen: dict = {}
    for ov in parsed:
        key = ov.key_or_group + (f"@{ov.package}" if ov.package else "")
        if key in seen:
            raise ConfigError(f"{key}: given twice ({seen[key]} and {ov.input_line}), and only the last would count; "
                              f"valid: {key} once")
        seen[key] = ov.input_line


def compose(overrides: list[str] | None = None, config_name: str = "config"):
    """Compose a config of ``conf/`` with command-line style overrides (no run folder)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    overrides = list(overrides or [])
    parse_overrides(overrides)
    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            try:
                cfg = hydra_compose(config_name=config_name, overrides=overrides)
            except (HydraException, OmegaConfBaseException) as exc:
                raise ConfigError(_one_line(exc, _world_schema(hydra_compose, config_name, overrides))) from None
    finally:
        GlobalHydra.instance().clear()
    return cfg


def _world_schema(hydra_compose, config_name: str, overrides: list[str]):
    """The world schema of the kind the overrides' choice of groups selects (None: the
    biobank world's), so that an error about a field lists the fields of that kind's world."""
    from . import kinds
    from .config_rules import WORLD_SCHEMAS

    choices = [o for o in overrides if "." not in o.split("=", 1)[0] and not o.startswith(("+", "~"))]
    try:
        kind = kinds.for_config(hydra_compose(config_name=config_name, overrides=choices))
    except Exception:  # the choices themselves do not compose: the first error says why
        return None
    return WORLD_SCHEMAS.get(kind.name, (None,))[0]


def _one_line(exc: Exception, world: Any = None) -> str:
    """Hydra wraps OmegaConf's typed-schema errors; report the key, the value and the type
    (``world``: the world schema of the config's kind, None for the biobank world's)."""
    cause = exc.__cause__ or exc
    text = str(cause)
    key = re.search(r"full_key:\s*(\S+)", text)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    if "Could not override" in text or "Could not append" in text or "Could not delete" in text:
        m = re.search(r"Could not (?:override|append to config|delete from config)[^']*'([^']+)'", text)
        name = m.group(1) if m else "?"
        return f"{name}: {first.rstrip('.')}; valid: {_valid_fields(name.rpartition('.')[0], world)}"
    if key:
        name = key.group(1)
        if "does not support deletion" in text:
            return f"{name}: {first}; valid: set a value instead (fields cannot be removed)"
        if _rule(name, world) is None:
            return f"{name}: no such field; valid: {_valid_fields(name.rpartition('.')[0], world)}"
        expected = _field_type(name, world)
        return f"{name}: {first}" + (f"; valid: {expected}" if expected else "")
    return " ".join(text.split())[:400]


# --------------------------------------------------------------------------- validate


@dataclass(frozen=True)
class Resolved:
    """A validated, frozen configuration ready to build: ``cfg`` the read-only
    OmegaConf node, ``typed`` the same as the schema's dataclasses."""

    cfg: Any  # OmegaConf DictConfig (read-only)
    seed: int

    @property
    def typed(self) -> RootConfig:
        """The config as typed dataclasses (``OmegaConf.to_object`` on the structured
        schema): a RootConfig whose world is a WorldConfig, scale a ScaleConfig, ..."""
        return OmegaConf.to_object(self.cfg)

    @property
    def world(self):
        return self.cfg.world

    @property
    def scale(self):
        return self.cfg.scale


def roles_needed(world) -> int:
    """Proteins needed by the world's roles (drivers, decoys, partners, surrogate)."""
    biases = set(world.biases)
    n = int(world.n_drivers)
    n += sum(1 for b in DECOY_MECHANISM if b in biases)
    n += int("T4" in biases) + int("A9" in biases) + int("T8" in biases)
    return n


def validate(cfg, seed_file_text: Optional[str] = None) -> Resolved:
    """Check every field before any compute; return a frozen resolved config."""
    if OmegaConf.is_missing(cfg, "world"):
        raise ConfigError(f"world: none chosen; valid: world=<id> with <id> one of {', '.join(group_options('world'))}")
    _check_keys(cfg, RootConfig, "")
    check_fields(cfg)
    w, s, c = cfg.world, cfg.scale, cfg.cluster
    frac = s.imaged / s.participants
    _need(0 < frac <= 1, f"scale.imaged: {s.imaged} participants imaged of {s.participants} is a fraction of {frac:.3g}; valid: imaged fraction in (0, 1]")
    _need(w.n_drivers <= s.proteins, f"world.n_drivers: {w.n_drivers} drivers but scale.proteins is {s.proteins}; valid: n_drivers <= proteins")
    need = roles_needed(w)
    _need(need <= s.proteins, f"world.biases: the world's roles need {need} proteins but scale.proteins is {s.proteins}; valid: proteins >= {need}")
    if w.n_drivers == 0:
        for b in ("T4", "A9"):
            _need(b not in w.biases, f"world.biases: {b} pairs a causal driver with a partner but world.n_drivers is 0; valid: remove {b} or set n_drivers >= 1")
    if "A9" in w.biases:
        _need(w.n_drivers >= 2, f"world.n_drivers: {w.n_drivers} with A9; valid: >= 2 (the delayed driver's late weight is scaled to the largest other driver)")
    _need(w.visit2_years < w.followup_years,
          f"world.visit2_years: {w.visit2_years} is not before the end of follow-up ({w.followup_years} years); valid: visit2_years < world.followup_years")
    if c.kind == "address":
        _need(c.address is not None, "cluster.address: null with cluster.kind=address; valid: a scheduler URL such as tcp://host:8786")

    seed = world_seed(w, seed_file_text)
    OmegaConf.set_readonly(cfg, True)
    return Resolved(cfg=cfg, seed=seed)


def world_seed(world, seed_file_text: Optional[str] = None) -> int:
    """The world's seed: ``world.seed``, or a held-out world's entry in the sealed seed file
    (any kind of world; an error names the field)."""
    from .seeds import SeedError, parse_seed

    seed_value, field_name = world.seed, "world.seed"
    if seed_value is None:
        field_name = f"seeds[{world.id}]"
        if seed_file_text is None:
            raise ConfigError(f"world.seed: world {world.id!r} carries no seed (held-out); valid: pass seeds=<path or URL> to a sealed seed file")
        seed_value = _lookup_seed(seed_file_text, world.id)
    try:
        return parse_seed(seed_value, field_name)
    except SeedError as exc:
        raise ConfigError(str(exc)) from None


def validate_panel(cfg) -> list[str]:
    """Check a panel config's own fields; return its world ids."""
    _need(not OmegaConf.is_missing(cfg, "panel"),
          f"panel: none chosen; valid: panel=<id> with <id> one of {', '.join(group_options('panel'))}")
    _check_keys(cfg, PanelAppConfig, "")
    check_fields(cfg, PANEL_FIELD_RULES)
    worlds, known = [str(w) for w in cfg.panel.worlds], group_options("world")
    for w in worlds:
        _need(w in known, f"panel.worlds: unknown world {w!r}; valid: {', '.join(known)}")
    _need(len(set(worlds)) == len(worlds), f"panel.worlds: {worlds!r} lists a world twice; valid: each world once")
    return worlds


def _lookup_seed(text: str, world_id: str):
    import yaml

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        raise ConfigError("seeds: the seed file is not YAML; valid: lines of world-id: '0x...'") from None
    if isinstance(data, dict) and "seeds" in data and isinstance(data["seeds"], dict):
        data = data["seeds"]
    if not isinstance(data, dict) or world_id not in data:
        raise ConfigError(f"seeds: the seed file has no entry for world {world_id!r}; valid: a mapping of world id to seed")
    return data[world_id]


def read_seed_file(url: Optional[str]) -> Optional[str]:
    if not url:
        return None
    import fsspec

    filesystem_class(url, field="seeds")
    try:
        with fsspec.open(url, "rt") as fh:
            return fh.read()
    except FileNotFoundError:
        raise ConfigError(f"seeds: {url!r} does not exist; valid: a readable path or fsspec URL of a seed file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"seeds: {url!r} cannot be read ({type(exc).__name__}); valid: a readable text file of world id: seed lines") from None


def load(overrides: list[str] | None = None) -> Resolved:
    """The validated config of ``overrides``, by the validation of the world's kind."""
    from . import kinds

    cfg = compose(overrides)
    return kinds.for_config(cfg).validate(cfg, read_seed_file(cfg.seeds))


#: What sealed/world.yaml adds to the world-determining config (pipeline.writers.sealed).
RECORD_ONLY = ("seed_int", "generator_version")


def from_record(world_yaml: str, out: str, cluster: Optional[dict] = None) -> Resolved:
    """The resolved config of a built world, from its ``sealed/world.yaml`` alone (the
    world-determining config and the seed), written to ``out`` on ``cluster`` (which
    change no byte of the world).  A held-out world's seed, absent from its config,
    is the record's ``seed_int``, passed as a seed file would pass it."""
    import yaml

    doc = yaml.safe_load(world_yaml)
    if not isinstance(doc, dict) or not isinstance(doc.get("world"), dict) or "seed_int" not in doc:
        raise ConfigError("world.yaml: not a world record; valid: a built world's sealed/world.yaml "
                          "(the world-determining config with seed_int)")
    seed_int = str(doc["seed_int"])
    doc = {k: v for k, v in doc.items() if k not in RECORD_ONLY}
    cfg = OmegaConf.structured(RootConfig)
    cfg.world = OmegaConf.structured(WorldConfig)
    cfg.cluster = OmegaConf.merge(OmegaConf.structured(ClusterConfig), cluster or {})
    cfg = OmegaConf.merge(cfg, doc, {"out": out})
    seed_file = json.dumps({str(doc["world"]["id"]): seed_int}) if doc["world"].get("seed") is None else None
    return validate(cfg, seed_file)


def to_plain(cfg) -> dict:
    return OmegaConf.to_container(cfg, resolve=True)


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def dataclass_defaults(cls) -> dict:
    return dataclasses.asdict(cls())
