"""The field rules of the config: every leaf field of the schema has one in
``FIELD_RULES`` (type, range or choices, and why), checked in one pass before any
compute; errors are one line naming the field, the bad value and what is valid.
Keys the schema does not have (``+`` additions included) are refused."""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any, Optional

from omegaconf import OmegaConf

from .config_schema import (ARCHETYPES, BIASES, CLUSTER_KINDS, IMAGING_LAYOUTS, TEST_LEAKS, ConfigError,
                            RootConfig, WorldConfig)


# --------------------------------------------------------------------------- field rules
#
# Every leaf field of the schema has one rule in FIELD_RULES (a test checks the
# table against the dataclasses): its type, range or choices, and why.  Rules
# that involve two fields (imaged <= participants, the roles' proteins) and the
# seed are checked after the table, in validate().

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Rule:
    """How one field is checked; ``check`` raises ConfigError naming the field."""

    kind: str  # "int", "float", "bool", "choice", "text", "pair", "custom"
    lo: Optional[float] = None
    hi: Optional[float] = None
    lo_open: bool = False
    hi_open: bool = False
    options: tuple = ()
    pattern: Optional[str] = None
    optional: bool = False  #: None is valid
    why: str = ""  #: appended to "valid: ..." (the reason for a bound)
    fn: Any = None  #: custom check(name, value)

    def valid(self) -> str:
        if self.kind == "custom":
            return self.why
        if self.kind == "bool":
            text = "true or false"
        elif self.kind == "choice":
            text = ", ".join(str(o) for o in self.options)
        elif self.kind == "text":
            text = f"text matching {self.pattern}"
        elif self.kind == "pair":
            text = f"[low, high] with {_num(self.lo)} <= low <= high <= {_num(self.hi)}"
        elif self.lo is not None and self.lo == self.hi:
            text = f"{_num(self.lo)} only"
        else:
            lb = ("(" if self.lo_open else "[") + (_num(self.lo) if self.lo is not None else "-inf")
            ub = (_num(self.hi) if self.hi is not None else "inf") + (")" if self.hi_open else "]")
            text = f"{'integer' if self.kind == 'int' else 'number'} in {lb}, {ub}"
        if self.optional:
            text += " or null"
        return text + (f" ({self.why})" if self.why else "")

    def check(self, name: str, v) -> None:
        if v is None and self.optional:
            return
        if self.kind == "custom":
            self.fn(name, v)
            return
        ok = self._ok(v)
        if not ok:
            raise ConfigError(f"{name}: {_show(v)} is invalid; valid: {self.valid()}")

    def _ok(self, v) -> bool:
        if self.kind == "bool":
            return isinstance(v, bool)
        if self.kind == "choice":
            return v in self.options
        if self.kind == "text":
            return isinstance(v, str) and re.fullmatch(self.pattern, v) is not None
        if self.kind == "pair":
            vals = list(v) if isinstance(v, (list, tuple)) or OmegaConf.is_list(v) else None
            return (vals is not None and len(vals) == 2 and all(_is_number(x) for x in vals)
                    and self.lo <= vals[0] <= vals[1] <= self.hi)
        if self.kind == "int" and not (isinstance(v, int) and not isinstance(v, bool)):
            return False
        if not _is_number(v):
            return False
        if self.lo is not None and not (v > self.lo if self.lo_open else v >= self.lo):
            return False
        return self.hi is None or (v < self.hi if self.hi_open else v <= self.hi)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _num(x) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) >= 10_000:
        x = int(x)
    return f"{x:,}" if isinstance(x, int) and abs(x) >= 10_000 else str(x)


def _show(v) -> str:
    if OmegaConf.is_config(v):
        v = OmegaConf.to_container(v)
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


def INT(lo=None, hi=None, **kw) -> Rule:
    return Rule("int", lo, hi, **kw)


def NUM(lo=None, hi=None, **kw) -> Rule:
    return Rule("float", lo, hi, **kw)


def PAIR(lo, hi, **kw) -> Rule:
    return Rule("pair", lo, hi, **kw)


def CHOICE(*options, **kw) -> Rule:
    return Rule("choice", options=tuple(options), **kw)


def TEXT(pattern: str, **kw) -> Rule:
    return Rule("text", pattern=pattern, **kw)


def CUSTOM(fn, **kw) -> Rule:
    return Rule("custom", fn=fn, **kw)


FLAG = Rule("bool")
COEF = NUM(-5, 5, why="an effect on standardised scales")
SD = NUM(0, 10, lo_open=True, why="a standard deviation")
NAME = TEXT(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", why="letters, digits, '.', '_', '-'; it names a folder")


def _check_biases(name: str, v) -> None:
    vals = list(v) if OmegaConf.is_list(v) or isinstance(v, (list, tuple)) else None
    if vals is None:
        raise ConfigError(f"{name}: {_show(v)} is invalid; valid: a list of {', '.join(BIASES)}")
    for b in vals:
        _need(b in BIASES, f"{name}: unknown bias {b!r}; valid: {', '.join(BIASES)}")
    _need(len(set(vals)) == len(vals), f"{name}: {vals!r} lists a bias twice; valid: each of {', '.join(BIASES)} at most once")


def _check_test_leaks(name: str, v) -> None:
    vals = list(v) if OmegaConf.is_list(v) or isinstance(v, (list, tuple)) else None
    if vals is None:
        raise ConfigError(f"{name}: {_show(v)} is invalid; valid: a list of {', '.join(TEST_LEAKS)} (test-only)")
    for b in vals:
        _need(b in TEST_LEAKS, f"{name}: unknown leak {b!r}; valid: {', '.join(TEST_LEAKS)}")
    _need(len(set(vals)) == len(vals), f"{name}: {vals!r} lists a leak twice; valid: each of {', '.join(TEST_LEAKS)} at most once")


def _check_af_beta(name: str, v) -> None:
    vals = list(v) if OmegaConf.is_list(v) or isinstance(v, (list, tuple)) else []
    _need(len(vals) == 2 and all(_is_number(x) and 0 < x <= 1000 for x in vals),
          f"{name}: {_show(v)} is invalid; valid: [a, b] with 0 < a, b <= 1000 (Beta shape parameters)")


def _check_seed_text(name: str, v) -> None:
    _need(isinstance(v, (str, int)) and not isinstance(v, bool),
          f"{name}: {type(v).__name__} is not a seed; valid: a 0x-prefixed hex string of at least 32 hex digits, or null")


def _check_out(name: str, v) -> None:
    _need(isinstance(v, str) and v.strip() != "",
          f"{name}: {_show(v)} is empty; valid: a local folder or fsspec URL such as ./worlds or s3://bucket/worlds")
    _need(v == v.strip() and "\n" not in v, f"{name}: {_show(v)} has surrounding whitespace; valid: a path or URL without it")


def _check_memory_limit(name: str, v) -> None:
    memory_limit_bytes(v, name=name)


def _check_address(name: str, v) -> None:
    _need(isinstance(v, str) and re.fullmatch(r"[a-z][a-z0-9+.-]*://\S+", v) is not None,
          f"{name}: {_show(v)} is invalid; valid: a scheduler URL such as tcp://host:8786")


def _check_dashboard(name: str, v) -> None:
    _need(isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9.\-\[\]:]*:\d{1,5}", v) is not None and int(v.rsplit(":", 1)[1]) < 65536,
          f"{name}: {_show(v)} is invalid; valid: host:port or :port (0 picks a free port), or null for no dashboard")


def _parquet_rules():
    # The tables' encoding is fixed (pipeline/bundle.py): these fields
    # exist so that sealed/world.yaml records it; any other value would be ignored.
    from .bundle import PARQUET_COMPRESSION as COMPRESSION
    from .bundle import PARQUET_COMPRESSION_LEVEL as COMPRESSION_LEVEL

    fixed = "the release's Parquet encoding is fixed by the bundle contract (pipeline/bundle.py)"
    return CHOICE(COMPRESSION, why=fixed), INT(COMPRESSION_LEVEL, COMPRESSION_LEVEL, why=fixed)


FIELD_RULES: dict = {
    # ---- scale: sizes, bounded by what the identifiers and formats can hold
    "scale.name": TEXT(r"[a-z0-9_-]{1,32}", why="a scale name in the release manifest"),
    "scale.participants": INT(200, _INT32_MAX, why="htslib and the genotype store index samples with 32-bit integers"),
    "scale.imaged": INT(1, _INT32_MAX),
    "scale.proteins": INT(1, 10_000, why="PROT_xxxx identifiers have four digits"),
    "scale.variants": INT(64, _INT32_MAX, why="at least 64 for 22 chromosomes"),
    "scale.metabolites": INT(1, 10_000, why="MET_xxxx identifiers have four digits"),
    # ---- world: identity and architecture
    "world.id": NAME,
    "world.seed": CUSTOM(_check_seed_text, optional=True, why="a 0x-prefixed hex string of at least 32 hex digits, or null"),
    "world.archetype": CHOICE(*ARCHETYPES),
    "world.hard": FLAG,
    "world.messy": FLAG,
    "world.n_drivers": INT(0, 6),
    "world.biases": CUSTOM(_check_biases, why=f"a list of distinct biases from {', '.join(BIASES)}"),
    "world.driver_weight": PAIR(0.0, 5.0),
    "world.cis_h2": PAIR(0.0, 0.9),
    "world.cis_h2_weak": PAIR(0.0, 0.9),
    "world.cis_h2_weak_fraction": NUM(0, 1, why="share of proteins in the weak h2 component"),
    "world.test_leaks": CUSTOM(_check_test_leaks, why=f"test-only: a list of distinct leaks from {', '.join(TEST_LEAKS)}"),
    "world.af_beta": CUSTOM(_check_af_beta, why="[a, b] with 0 < a, b <= 1000 (Beta shape parameters)"),
    "world.ld_decay_kb": NUM(0, 1e6, lo_open=True),
    "world.trans_fraction": NUM(0, 1),
    "world.trans_private_fraction": NUM(0, 1, why="share of trans effects (drivers' aside) from a protein's own trans variant"),
    "world.far_gap_min_kb": NUM(0, 1e5, why="smallest far gap between clusters of linked variants"),
    "world.pathway_absent_rate": NUM(0, 1, why="share of ordinary pathways nobody follows"),
    "world.pathway_weight": PAIR(0.0, 5.0, why="an ordinary pathway feeder's weight"),
    "world.pathway_late_followers": PAIR(0, 10, why="late followers of an ordinary pathway with a delayed feeder"),
    "world.pathway_residual": PAIR(0.0, 2.0, why="residual SD of an ordinary pathway"),
    "world.pathway_loading": PAIR(0.0, 0.79, why="an ordinary follower's loading on its pathway (below the 0.8 residual)"),
    "world.n_factors": INT(1, 64),
    "world.factor_loading_sd": NUM(0, 1),
    "world.concordance": PAIR(0.0, 1.0),
    "world.protein_missing": NUM(0, 0.5, hi_open=True),
    "world.latent_residual": SD,
    "world.morphology_residual": NUM(0, 5, why="a standard deviation"),
    "world.visit2_fraction": NUM(0, 1, lo_open=True, why="visit-2 fraction"),
    "world.visit2_years": NUM(0, 50, lo_open=True, why="and below world.followup_years"),
    "world.eval_fraction": NUM(0, 1, lo_open=True),
    "world.followup_years": NUM(5, 50, lo_open=True),
    "world.n_centres": INT(2, 10),
    "world.roles_salt": TEXT(r"[A-Za-z0-9._-]{1,64}", optional=True),
    # ---- world.bias_params: the supplement's coefficients (SPEC section 4)
    "world.bias_params.T1.bmi_loading": COEF,
    "world.bias_params.T1.residual": SD,
    "world.bias_params.T2.latent_loading": COEF,
    "world.bias_params.T2.residual": SD,
    "world.bias_params.T3.eta": COEF,
    "world.bias_params.T3.age": COEF,
    "world.bias_params.T3.bmi": COEF,
    "world.bias_params.T3.latent": COEF,
    "world.bias_params.T3.protein": COEF,
    "world.bias_params.T3.noise": SD,
    "world.bias_params.T4.shared": FLAG,
    "world.bias_params.T5.amplitude": NUM(0, 0.5),
    "world.bias_params.T5.n_terms": INT(1, 11, why="the site field's basis has 11 terms"),
    "world.bias_params.T6.edv": COEF,
    "world.bias_params.T6.esv": COEF,
    "world.bias_params.T7.direct": COEF,
    "world.bias_params.T8.hazard": COEF,
    "world.bias_params.T8.imaging": NUM(0, 5, why="scale of the surrogate's imaging effect (0 = none)"),
    "world.bias_params.T9.scale": NUM(0, 10, lo_open=True, why="the site's reporting scale"),
    "world.bias_params.T9.offset": NUM(-10, 10),
    "world.bias_params.T9.site_age_shift": NUM(-20, 20, why="years"),
    "world.bias_params.T9.site_bmi_shift": NUM(-10, 10, why="kg/m2"),
    "world.bias_params.T9.site_smoking_logodds": COEF,
    "world.bias_params.A9.late_ratio": PAIR(0.0, 10.0),
    "world.bias_params.A9.base_fraction": PAIR(0.0, 1.0),
    "world.bias_params.A9.partner_latent": COEF,
    "world.bias_params.A9.partner_residual": SD,
    "world.bias_params.A9.driver_h2": NUM(0, 0.9),
    "world.bias_params.hard.saturation": NUM(0, 10, lo_open=True),
    "world.bias_params.hard.interaction": COEF,
    "world.bias_params.hard.polygenic_sd": NUM(0, 5),
    "world.bias_params.hard.polygenic_variants": INT(1, 100_000),
    "world.bias_params.hard.residual": SD,
    "world.bias_params.messy.sentinel_rate": NUM(0, 0.2),
    "world.bias_params.messy.protein_missing_base": NUM(0, 0.5, lo_open=True, why="a probability; its log-odds is used"),
    "world.bias_params.messy.protein_missing_bmi": COEF,
    "world.bias_params.messy.implausible_rate": NUM(0, 0.1),
    "world.bias_params.messy.mixed_unit_fraction": NUM(0, 1),
    # ---- cluster: where it runs (never changes an output byte)
    "cluster.kind": CHOICE(*CLUSTER_KINDS),
    "cluster.address": CUSTOM(_check_address, optional=True, why="a scheduler URL such as tcp://host:8786, or null"),
    "cluster.n_workers": INT(1, 1024, optional=True, why="null = one per core"),
    "cluster.threads_per_worker": INT(1, 256),
    "cluster.memory_limit": CUSTOM(_check_memory_limit, why="auto, a fraction of the machine's memory, or a size such as 4GiB"),
    "cluster.chunk_blocks": INT(1, 100_000),
    "cluster.progress": FLAG,
    "cluster.dashboard_address": CUSTOM(_check_dashboard, optional=True, why="host:port or :port, or null for no dashboard"),
    # ---- release: what the bundle holds
    "release.imaging": CHOICE(*IMAGING_LAYOUTS),
    "release.visit2_imaging": FLAG,
    "release.angiograms": INT(0, 0, why="angiogram rendering is not implemented yet"),
    "release.vcf": FLAG,
    "release.genotype_zarr": FLAG,
    "release.parquet_compression": None,  # filled from the bundle contract's constants below
    "release.parquet_compression_level": None,
    # ---- the rest
    "oracle.paper_compat": FLAG,
    "oracle.realism": FLAG,
    "out": CUSTOM(_check_out, why="a local folder or fsspec URL"),
    "seeds": TEXT(r"\S(.*\S)?", optional=True, why="a path or fsspec URL of a sealed seed file"),
    "paper_compat": FLAG,
}
FIELD_RULES["release.parquet_compression"], FIELD_RULES["release.parquet_compression_level"] = _parquet_rules()

PANEL_FIELD_RULES: dict = {
    "panel.id": NAME,
    "panel.worlds": CUSTOM(lambda name, v: _need(
        (OmegaConf.is_list(v) or isinstance(v, (list, tuple))) and len(v) > 0 and all(isinstance(w, str) for w in v),
        f"{name}: {_show(v)} is invalid; valid: a non-empty list of world ids"), why="a non-empty list of world ids"),
    "jobs": INT(1, 64, why="client threads driving world builds"),
}


def memory_limit_bytes(value, total: Optional[int] = None, threads: int = 1, cores: Optional[int] = None,
                       name: str = "cluster.memory_limit") -> Optional[int]:
    """Bytes per worker for ``cluster.memory_limit``, read as distributed reads it:
    ``auto`` (the machine's memory times threads per worker / cores), a number
    up to 1 (a fraction of the machine's memory), a larger number (bytes), a size
    such as ``4GiB``, or ``0`` (no limit: returns None).  ``total`` and
    ``cores`` default to this machine's."""
    import os

    from dask.utils import parse_bytes

    bad = (f"{name}: {_show(value)} is not a memory size; valid: auto, a fraction of the machine's memory in (0, 1], "
           "a size such as 4GiB or 4000MB, or 0 for no limit")
    text = str(value).strip().lower() if value is not None else "0"
    if total is None:
        import psutil

        total = int(psutil.virtual_memory().total)
    if text == "auto":
        return int(total * min(1.0, threads / max(1, cores or os.cpu_count() or 1)))
    try:
        x = float(text)
    except ValueError:
        x = None
    if x is not None:
        _need(math.isfinite(x) and 0 <= x, bad)
        if x == 0:
            return None
        if x <= 1:
            return int(total * x)
        return int(x)
    try:
        nbytes = parse_bytes(text)
    except (ValueError, TypeError):
        raise ConfigError(bad) from None
    _need(nbytes > 0, bad)
    return int(nbytes)


def _hints(cls, world=None) -> dict:
    """Field name -> type of a schema dataclass.  The root's ``world`` is Any (each kind
    of world types its own node): ``world`` is its schema, the biobank world's
    (WorldConfig) unless another kind's is given."""
    import typing

    hints = typing.get_type_hints(cls)
    if isinstance(cls, type) and issubclass(cls, RootConfig):
        hints["world"] = world or WorldConfig
    return hints


def schema_leaves(cls=None, prefix: str = "", world=None) -> list[str]:
    """Dotted names of every leaf field of a schema dataclass (RootConfig by default,
    its world typed by ``world``: WorldConfig by default)."""
    cls = cls or RootConfig
    hints = _hints(cls, world)
    out = []
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        if dataclasses.is_dataclass(t):
            out += schema_leaves(t, f"{prefix}{f.name}.")
        else:
            out.append(prefix + f.name)
    return out


# --------------------------------------------------------------------------- other kinds of world
#
# Another kind of world (pipeline.kinds) has its own world schema and the rules of its
# ``world.*`` fields; the rest of the root (scale, cluster, release, out, ...) is shared
# and keeps the rules above.  A kind registers its schema here from its register_schema
# hook, so that Hydra's composition errors name its fields and their rules too.

#: kind name -> (world schema dataclass, {"world.<field>": Rule}).
WORLD_SCHEMAS: dict = {}


def register_world_rules(kind: str, world_cls, world_rules: dict) -> dict:
    """Record kind ``kind``'s world schema and rules; returns every rule of its config
    (the shared non-world rules with its own).  Every leaf of its world schema must
    have a rule, and every rule a leaf."""
    leaves = {n for n in schema_leaves(RootConfig, world=world_cls) if n.startswith("world.")}
    if set(world_rules) != leaves:
        raise ValueError(f"world kind {kind!r}: fields without a rule {sorted(leaves - set(world_rules))}, rules without a "
                         f"field {sorted(set(world_rules) - leaves)}; valid: one rule per leaf field of {world_cls.__name__}")
    WORLD_SCHEMAS[kind] = (world_cls, dict(world_rules))
    return kind_rules(kind)


def kind_rules(kind: str) -> dict:
    """Every field rule of a config of kind ``kind``: the shared ones and its world's."""
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


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise ConfigError(msg)
