"""The field rules of the config, derived from the schema: every leaf field of a schema
dataclass declares its rule on itself (``pipeline.config_schema.ruled``: type, range or
choices, and why), and this module collects them into ``FIELD_RULES`` (dotted name ->
Rule), checks them in one pass before any compute (errors are one line naming the
field, the bad value and what is valid) and renders them as a documentation table
(:func:`rules_table`).  Keys the schema does not have (``+`` additions included) are
refused."""
from __future__ import annotations

import dataclasses
import typing
from typing import Any, Optional

from omegaconf import OmegaConf

from . import kinds
from .config_schema import (  # the rules' vocabulary, re-exported (__all__)
    CHOICE, COEF, CUSTOM, FLAG, INT, INT32_MAX, NAME, NUM, PAIR, RULE, SD, SEED, TEXT, ConfigError, PanelAppConfig,
    RootConfig, Rule, WorldConfig, _need, _show, memory_limit_bytes, register_configs
)


def _hints(cls, world=None) -> dict:
    """Field name -> type of a schema dataclass.  The root's ``world`` is Any (each kind
    of world types its own node): ``world`` is its schema, the biobank world's
    (WorldConfig) unless another kind's is given."""
    hints = typing.get_type_hints(cls)
    if isinstance(cls, type) and issubclass(cls, RootConfig):
        hints["world"] = world or WorldConfig
    return hints


def schema_leaves(cls=None, prefix: str = "", world=None) -> list[str]:
    """Dotted names of every leaf field of a schema dataclass (RootConfig by default,
    its world typed by ``world``: WorldConfig by default)."""
    return [name for name, *_ in _leaf_fields(cls or RootConfig, prefix, world)]


def _leaf_fields(cls, prefix: str = "", world=None, node: Any = None) -> list[tuple]:
    """(dotted name, dataclasses.Field, type, schema default) of every leaf field of schema
    ``cls`` in the schema's order.  ``node`` is the node's default instance (None: ``cls()``:
    a node the schema leaves MISSING, such as the root's scale, shows its class's defaults)."""
    hints = _hints(cls, world)
    if not dataclasses.is_dataclass(node) or isinstance(node, type):
        try:
            node = cls()
        except TypeError:  # a field without a default: the config must set it ("???", as OmegaConf's MISSING)
            node = None
    out = []
    for f in dataclasses.fields(cls):
        t, value = hints[f.name], getattr(node, f.name, "???")
        if dataclasses.is_dataclass(t):
            out += _leaf_fields(t, f"{prefix}{f.name}.", node=value)
        else:
            out.append((prefix + f.name, f, t, value))
    return out


def declared_rules(cls=None, world=None, prefix: str = "") -> dict:
    """Dotted name -> Rule of every leaf of schema ``cls`` (RootConfig by default, its world
    typed by ``world``), from each field's metadata; a leaf without a rule maps to None."""
    return {name: f.metadata.get(RULE) for name, f, *_ in _leaf_fields(cls or RootConfig, prefix, world)}


def node_fields_with_rules(cls=None, world=None, prefix: str = "") -> list[str]:
    """Dotted names of fields that hold a node (a dataclass) yet declare a rule: a rule
    names no leaf field (the declared-once test requires none)."""
    cls = cls or RootConfig
    hints, out = _hints(cls, world), []
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        if dataclasses.is_dataclass(t):
            if RULE in f.metadata:
                out.append(prefix + f.name)
            out += node_fields_with_rules(t, prefix=f"{prefix}{f.name}.")
    return out


def _derive(cls, world=None, keep=lambda name: True, what: str = "") -> dict:
    """The declared rules of the leaves of ``cls`` that ``keep`` keeps; a leaf without one is an error."""
    rules = {k: r for k, r in declared_rules(cls, world).items() if keep(k)}
    missing = [k for k, r in rules.items() if not isinstance(r, Rule)]
    if missing:
        raise ValueError(f"{what or cls.__name__}: fields without a rule {missing}; valid: each leaf field declared "
                         "with pipeline.config_schema.ruled(rule, default)")
    return rules


#: Every field rule of a biobank config (its world a WorldConfig), in the schema's order.
FIELD_RULES: dict = _derive(RootConfig)
#: The panel app's own fields (those of PanelAppConfig beyond the root's).
PANEL_FIELD_RULES: dict = _derive(PanelAppConfig, keep=lambda name: name not in FIELD_RULES)


# --------------------------------------------------------------------------- other kinds of world
#
# Another kind of world (pipeline.kinds) has its own world schema, whose leaves declare
# the rules of its ``world.*`` fields; the rest of the root (scale, cluster, release, out,
# ...) is shared and keeps the rules above.  A kind registers its schema here, so that
# Hydra's composition errors name its fields and their rules too.

#: kind name -> (world schema dataclass, {"world.<field>": Rule}).
WORLD_SCHEMAS: dict = {}


def register_world_schema(kind: str, world_cls) -> dict:
    """Record kind ``kind``'s world schema (each leaf declaring its rule); returns every
    rule of its config (the shared non-world rules with its world's)."""
    world_rules = _derive(RootConfig, world=world_cls, keep=lambda name: name.startswith("world."),
                          what=f"world kind {kind!r} ({world_cls.__name__})")
    WORLD_SCHEMAS[kind] = (world_cls, world_rules)
    return kind_rules(kind)


def kind_rules(kind: str) -> dict:
    """Every field rule of a config of kind ``kind``: the shared ones and its world's."""
    if kind == "biobank":
        return dict(FIELD_RULES)
    _, world_rules = WORLD_SCHEMAS[kind]
    return {**{k: v for k, v in FIELD_RULES.items() if not k.startswith("world.")}, **world_rules}


def check_kind_config(cfg, kind: str) -> None:
    """The key and field checks of :func:`pipeline.config.validate` for a config of
    kind ``kind`` (its world typed by its own schema)."""
    _need(not OmegaConf.is_missing(cfg, "world"), "world: none chosen; valid: world=<id>")
    world_cls, _ = WORLD_SCHEMAS[kind]
    _check_keys(cfg, RootConfig, "", world=world_cls)
    check_fields(cfg, kind_rules(kind))


def _rule(name: str, world=None) -> Optional[Rule]:
    """The rule of field ``name`` in a config whose world is typed by ``world`` (None: the
    biobank world's, or a panel's)."""
    kind = next((k for k, (cls, _) in WORLD_SCHEMAS.items() if cls is world), None) if world is not None else None
    for rules in ((kind_rules(kind),) if kind is not None else (FIELD_RULES, PANEL_FIELD_RULES)):
        if rules.get(name) is not None:
            return rules[name]
    return None


def _schema_fields(path: str, cls=None, world=None) -> Optional[dict]:
    """Field name -> type of the dataclass node at ``path`` ("" is the root)."""
    cls = cls or RootConfig
    for part in [p for p in path.split(".") if p]:
        t = _hints(cls, world).get(part)
        if t is None or not dataclasses.is_dataclass(t):
            return None
        cls = t
    return _hints(cls, world)


def _valid_fields(path: str, world=None) -> str:
    """The fields at ``path`` of the root whose world is typed by ``world`` (default: the biobank world's)."""
    fields = _schema_fields(path, world=world)
    if fields is None:
        return "the fields of the schema in pipeline/config.py"
    return ", ".join(fields)


def _field_type(name: str, world=None) -> str:
    rule = _rule(name, world)
    return rule.valid() if rule is not None else ""


def _check_keys(node, cls, prefix: str, world=None) -> None:
    """Reject keys the schema does not have (``+key=value`` additions included)
    and fields that were deleted (``~key``)."""
    hints = _hints(cls, world)
    keys = list(node.keys())
    for key in keys:
        if key not in hints:
            raise ConfigError(f"{prefix}{key}: no such field; valid: {', '.join(hints)}")
    for name, t in hints.items():
        if name not in keys:
            raise ConfigError(f"{prefix}{name}: missing; valid: a value for every field of {cls.__name__}")
        if dataclasses.is_dataclass(t) and not OmegaConf.is_missing(node, name):
            child = node[name]
            _need(OmegaConf.is_dict(child), f"{prefix}{name}: {_show(child)} is invalid; valid: a {t.__name__} mapping")
            _check_keys(child, t, f"{prefix}{name}.")


def check_fields(cfg, rules: dict = FIELD_RULES) -> None:
    """Apply the rule of every field (MISSING values are reported as such)."""
    for name, rule in rules.items():
        if OmegaConf.is_missing(cfg, name):
            raise ConfigError(f"{name}: no value; valid: {rule.valid() or 'a value'}")
        rule.check(name, OmegaConf.select(cfg, name))


# --------------------------------------------------------------------------- the documentation table


def _world_schema_of(kind: str):
    """The world schema of a registered kind (its schema registered on demand)."""
    if kind == "biobank":
        return WorldConfig
    if kind not in WORLD_SCHEMAS:
        known = kinds.registered()
        if kind not in known:
            raise ValueError(f"kind: {kind!r} is not a registered world kind; valid: {', '.join([*known, 'panel'])}")
        register_configs()  # a kind registers its world schema from its register_schema hook
    if kind not in WORLD_SCHEMAS:
        raise ValueError(f"kind: {kind!r} declares no world schema with rules (pipeline.config_rules.register_world_schema)")
    return WORLD_SCHEMAS[kind][0]


def _type_text(t) -> str:
    """A field's type as the docs show it: int, float, str, bool, list of float, ... or null."""
    args = typing.get_args(t)
    if typing.get_origin(t) is typing.Union:
        inner = [a for a in args if a is not type(None)]
        return " or ".join(_type_text(a) for a in inner) + " or null"
    if typing.get_origin(t) in (list, typing.List):
        return f"list of {_type_text(args[0])}" if args else "list"
    return getattr(t, "__name__", str(t))


def _default_text(value) -> str:
    """A field's schema default as YAML spells it (``???``: none, the config must set it)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_default_text(v) for v in value) + "]"
    return str(value)


def rules_table(kind: str = "biobank") -> list[dict]:
    """One row per leaf field of a config of kind ``kind`` (a registered kind of world, or
    ``"panel"``: the panel app's fields besides a world's), in the schema's order, for the docs:
    ``{"field": dotted name, "type": "int" | "list of float" | "str or null" | ...,
    "default": the schema's default as YAML spells it ("???" when the config must set it;
    a scale's sizes come from conf/scale/), "rule": what is valid (the text an error
    message ends with)}``.  Every value is a string."""
    if kind == "panel":
        leaves = _leaf_fields(PanelAppConfig)
        rules = {name: rule for name, rule in {**FIELD_RULES, **PANEL_FIELD_RULES}.items() if not name.startswith("world.")}
    else:
        world = _world_schema_of(kind)
        leaves, rules = _leaf_fields(RootConfig, world=world), kind_rules(kind)
    order = {name: i for i, name in enumerate(rules)}
    rows = []
    for name, _, hint, default in sorted((x for x in leaves if x[0] in rules), key=lambda x: order[x[0]]):
        rows.append({"field": name, "type": _type_text(hint), "default": _default_text(default),
                     "rule": rules[name].valid()})
    return rows


__all__ = [
    # the rules' vocabulary (declared in pipeline.config_schema, re-exported)
    "CHOICE", "COEF", "CUSTOM", "FLAG", "INT", "INT32_MAX", "NAME", "NUM", "PAIR", "SD", "SEED", "TEXT", "Rule",
    "memory_limit_bytes",
    # derived from the schemas' declarations
    "FIELD_RULES", "PANEL_FIELD_RULES", "WORLD_SCHEMAS", "check_fields", "check_kind_config", "declared_rules",
    "kind_rules", "node_fields_with_rules", "register_world_schema", "rules_table", "schema_leaves",
]
