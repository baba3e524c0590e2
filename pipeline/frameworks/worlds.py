"""World specifications for the frameworks: training worlds from a named seed namespace, the
curriculum's world families, building and reusing worlds by config digest, and the worlds of
an evaluation panel.

Training seeds
--------------
A training world's seed is a keyed hash of its namespace and index::

    seed = HMAC-SHA256(key, "drugtargetworld/training-seed/v1" NUL namespace NUL index)[:16] | 2**127

(128 bits, the top bit set: ``pipeline.seeds`` refuses shorter seeds).  ``key`` defaults to
the public domain string, so anyone can regenerate a public namespace's worlds (they are
training data, never evaluation worlds); a private ``seed_key`` makes a namespace nobody
else can regenerate.  Every derived seed is compared with every evaluation seed before any
row exists: each ``seed`` (and ``seeds`` mapping) of every config under ``conf/``
(the development worlds of every panel) and of a given sealed seeds file (the held-out
worlds).  A collision is refused with one line naming ``seed_namespace``: a training
namespace can never yield an evaluation seed.

World families (the curriculum)
-------------------------------
A family is a named set of the generator's validated settings: a development world's config
as the template, and overrides of the number of drivers, the biases, ``hard`` and ``messy``
(a biobank world) or of the label budget (a screening world).  The archetype of a biobank
family's world cycles over the four by index.  A family is cited as
``drugtargetworld/<kind>/<family>@<scale>`` (plus ``+noimaging`` when its worlds have no
pixels), together with the seed namespace and the generator version: that names every world
exactly (:func:`family_id`).

Building and reuse
------------------
A world is built on first use into ``<cache>/<key>/<world id>/`` where ``key`` hashes the
generator version, the world-determining config (``pipeline.buildrecord.config_digest``:
the resolved config without out, cluster and seed) and the seed; a folder whose manifests
exist and whose build record names the same config digest is reused, so every rollout of a
group (and every later run) shares one world.  One build per key at a time: a lock in the
process and a file lock beside the folder.
"""
from __future__ import annotations

import fcntl
import hashlib
import hmac
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .common import ParameterError

TRAINING_DOMAIN = "drugtargetworld/training-seed/v1"
NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
SCALES = ("tiny", "small")
ARCHETYPES = ("dcm", "hcm", "hfpef", "ischemic")
RELEASES = ("default", "noimaging")


# ----------------------------------------------------------------------------- families


@dataclass(frozen=True)
class Family:
    """A named world family: a template world's validated settings and the overrides that
    define the family (see the module docstring)."""

    name: str
    kind: str
    level: int  # the curriculum's order within a kind (1 easiest)
    template: str  # a world of conf/world/
    overrides: tuple = ()
    archetypes: tuple = ()  # cycled over by index (a biobank family)
    description: str = ""


FAMILIES: dict = {f.name: f for f in (
    Family("intro", "biobank", 1, "standard-01",
           ("world.n_drivers=3", "world.biases=[T5,T6,T8]"), ARCHETYPES,
           "three drivers and only the biases every world carries: the site field (T5), benign exercise "
           "remodelling (T6) and the harmful surrogate (T8)"),
    Family("confounded", "biobank", 2, "standard-01",
           ("world.n_drivers=3", "world.biases=[T1,T2,T5,T6,T8]"), ARCHETYPES,
           "intro plus confounding by BMI (T1) and reverse causation (T2)"),
    Family("standard", "biobank", 3, "standard-01",
           ("world.n_drivers=3", "world.biases=[T1,T2,T4,T5,T6,T8,A9]"), ARCHETYPES,
           "the panel's standard worlds (standard-01's settings): confounded plus a shared instrument (T4) and a "
           "delayed-effect pair (A9), whose causal member only an experiment separates"),
    Family("all-biases", "biobank", 4, "all-biases",
           ("world.n_drivers=4", "world.biases=[T1,T2,T3,T4,T5,T6,T7,T8,T9,A9]"), ARCHETYPES,
           "four drivers and every planted bias at once (T1-T9 and A9)"),
    Family("hard", "biobank", 5, "hard-01",
           ("world.n_drivers=4", "world.hard=true", "world.biases=[T1,T2,T3,T5,T6,T8,T9,A9]"), ARCHETYPES,
           "the panel's hard worlds (hard-01's settings): saturation, a driver interaction, a polygenic background "
           "and a residual SD of 0.70, with imaging selection (T3) and assay unit mixing (T9)"),
    Family("hard-messy", "biobank", 6, "hard-messy-01",
           ("world.n_drivers=3", "world.hard=true", "world.messy=true",
            "world.biases=[T1,T2,T3,T5,T6,T8,T9,A9]"), ARCHETYPES,
           "hard plus the data problems of a real biobank (sentinel codes, non-random missingness, mixed units, "
           "implausible values; hard-messy-01's settings)"),
    Family("null", "biobank", 7, "null-01",
           ("world.n_drivers=0", "world.biases=[T1,T2,T3,T5,T6,T7,T8]"), ARCHETYPES,
           "no causal driver (null-01's settings): the right answer is restraint"),
    Family("labels-20", "screening", 1, "screening-01", ("world.budget_fraction=0.20",), (),
           "a label budget of 20 % of the library (twice the benchmark's)"),
    Family("labels-10", "screening", 2, "screening-01", ("world.budget_fraction=0.10",), (),
           "the benchmark's label budget, 10 % of the library"),
    Family("labels-05", "screening", 3, "screening-01", ("world.budget_fraction=0.05",), (),
           "half the benchmark's label budget, 5 % of the library"),
)}
DEFAULT_FAMILY = {"biobank": "standard", "screening": "labels-10"}


def families(kind: Optional[str] = None) -> list:
    """The families (of ``kind``), in curriculum order."""
    return sorted((f for f in FAMILIES.values() if kind is None or f.kind == kind), key=lambda f: (f.kind, f.level))


def family_id(kind: str, family: str, scale: str, release: str = "default") -> str:
    """The name a result cites for a family's worlds (with the seed namespace and generator version)."""
    return f"drugtargetworld/{kind}/{family}@{scale}" + ("+noimaging" if release == "noimaging" else "")


# ----------------------------------------------------------------------------- seeds


def check_namespace(namespace: Any) -> str:
    if not isinstance(namespace, str) or not NAMESPACE.fullmatch(namespace):
        raise ParameterError(f"seed_namespace={namespace!r}: invalid; valid: 1-32 letters, digits, '_' or '-', "
                             "starting with a letter or digit (e.g. train)")
    return namespace


def training_seed(namespace: str, index: int, key: Optional[str] = None) -> int:
    """The seed of world ``index`` of a training namespace (see the module docstring)."""
    message = f"{TRAINING_DOMAIN}\0{namespace}\0{int(index)}".encode()
    digest = hmac.new((key if key is not None else TRAINING_DOMAIN).encode(), message, hashlib.sha256).digest()
    return int.from_bytes(digest[:16], "big") | (1 << 127)


def _walk_seeds(node: Any, where: str, out: dict) -> None:
    """Every ``seed`` value and every entry of a ``seeds`` mapping in a parsed config."""
    from ..seeds import SeedError, parse_seed

    def add(value: Any, name: Any) -> None:
        if value is None or isinstance(value, (dict, list)):
            return
        try:
            out.setdefault(parse_seed(value, "seed"), f"{where}: {name}")
        except SeedError:
            pass  # not a 128-bit seed: it cannot equal a training seed

    if isinstance(node, dict):
        for key, value in node.items():
            if key == "seed":
                add(value, node.get("id", "seed"))
            elif key == "seeds" and isinstance(value, dict):
                for name, seed in value.items():
                    add(seed, name)
            else:
                _walk_seeds(value, where, out)
    elif isinstance(node, list):
        for value in node:
            _walk_seeds(value, where, out)


def evaluation_seeds(seeds: Optional[str] = None) -> dict:
    """{seed: where it is}: every seed of every config under ``conf/`` (the panels'
    development worlds) and of the sealed seeds file ``seeds`` (path or fsspec URL; the
    held-out worlds), parsed as ``pipeline.config`` parses them."""
    import yaml

    from .. import config
    from ..paths import CONF_DIR

    out: dict = {}
    for path in sorted(Path(CONF_DIR).rglob("*.yaml")):
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        _walk_seeds(doc, f"conf/{path.relative_to(CONF_DIR)}", out)
    if seeds:
        try:
            text = config.read_seed_file(seeds)
        except config.ConfigError as error:
            raise ParameterError(f"seeds={seeds!r}: {str(error).split(': ', 1)[-1]}") from None
        try:
            doc = yaml.safe_load(text) or {}
        except yaml.YAMLError:
            raise ParameterError(f"seeds={seeds!r}: not YAML; valid: a mapping of world id to seed") from None
        if isinstance(doc, dict) and isinstance(doc.get("seeds"), dict):
            doc = doc["seeds"]
        if not isinstance(doc, dict):
            raise ParameterError(f"seeds={seeds!r}: not a mapping; valid: a mapping of world id to seed")
        _walk_seeds({"seeds": doc}, f"seeds file {seeds}", out)
    return out


# ----------------------------------------------------------------------------- world specs


@dataclass(frozen=True)
class WorldSpec:
    """One training world, known at load and built on first use."""

    kind: str
    family: str
    scale: str
    release: str
    namespace: str
    index: int
    seed: int = field(repr=False)  # never in a dataset row
    archetype: Optional[str] = None

    @property
    def world_id(self) -> str:
        return f"train-{self.family}-{self.index:06d}"

    @property
    def family_id(self) -> str:
        return family_id(self.kind, self.family, self.scale, self.release)

    def overrides(self, out: str) -> list:
        fam = FAMILIES[self.family]
        extra = [f"world.archetype={self.archetype}"] if self.archetype else []
        release = [f"release={self.release}"] if self.kind == "biobank" else []
        return [f"world={fam.template}", f"world.id={self.world_id}", f"world.seed={hex(self.seed)}", *fam.overrides,
                *extra, f"scale={self.scale}", *release, f"out={out}", "cluster=sync", "cluster.progress=false"]

    def row(self) -> dict:
        """The dataset row's public description (no seed, no path)."""
        return {"kind": self.kind, "family": self.family, "family_id": self.family_id, "scale": self.scale,
                "namespace": self.namespace, "index": self.index, "archetype": self.archetype}


def training_specs(kind: str, family: Any, scale: str, n_worlds: int, namespace: str, *, start: int = 0,
                   release: str = "default", seed_key: Optional[str] = None, seeds: Optional[str] = None) -> list:
    """The specs of worlds ``start .. start + n_worlds - 1`` of ``namespace``: one family, or a
    list of families taken in turn; every seed checked against the evaluation seeds."""
    names = [family] if isinstance(family, str) else list(family or [DEFAULT_FAMILY[kind]])
    if not names:
        raise ParameterError(f"preset={family!r}: empty; valid: one of {', '.join(f.name for f in families(kind))}")
    for name in names:
        fam = FAMILIES.get(name)
        if fam is None or fam.kind != kind:
            raise ParameterError(f"preset={name!r}: not a {kind} world family; valid: "
                                 f"{', '.join(f.name for f in families(kind))}")
    taken = evaluation_seeds(seeds)
    specs = []
    for index in range(start, start + n_worlds):
        name = names[(index - start) % len(names)]
        fam = FAMILIES[name]
        seed = training_seed(namespace, index, seed_key)
        if seed in taken:
            raise ParameterError(f"seed_namespace={namespace!r}: world {index} derives the seed of an evaluation world "
                                 f"({taken[seed]}); valid: another seed_namespace or seed_key")
        arch = fam.archetypes[index % len(fam.archetypes)] if fam.archetypes else None
        specs.append(WorldSpec(kind, name, scale, release, namespace, index, seed, arch))
    return specs


# ----------------------------------------------------------------------------- building


_HYDRA = threading.Lock()  # Hydra's compose is process-global: one at a time
_KEYS: dict = {}
_KEYS_LOCK = threading.Lock()


def resolve(overrides: list):
    """``pipeline.config.load`` (serialised: Hydra's global state is not thread-safe)."""
    from .. import config

    with _HYDRA:
        return config.load(overrides)


def world_key(resolved) -> str:
    """The cache key of a resolved world: generator version, config digest, seed."""
    from .. import __version__
    from ..buildrecord import config_digest

    text = f"{__version__}\0{config_digest(resolved.cfg)}\0{resolved.seed:x}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def is_built(world_dir: Path, resolved=None) -> bool:
    """Both manifests written (the build finished) and, given ``resolved``, the build record
    naming the same config digest and the sealed record the same seed."""
    import yaml

    from ..buildrecord import config_digest, read

    world_dir = Path(world_dir)
    if not ((world_dir / "release" / "MANIFEST.json").is_file() and (world_dir / "sealed" / "MANIFEST.json").is_file()):
        return False
    if resolved is None:
        return True
    record = read(world_dir)  # another format_version raises, naming the file
    try:
        sealed = yaml.safe_load((world_dir / "sealed" / "world.yaml").read_text())
    except (OSError, ValueError, yaml.YAMLError):
        return False
    if record is None:
        return False
    return record.get("config_sha256") == config_digest(resolved.cfg) and _sealed_seed(sealed) == resolved.seed


def _sealed_seed(doc: Any) -> Optional[int]:
    """The seed sealed/world.yaml records (``seed_int`` of a biobank world, ``world.seed`` otherwise)."""
    from ..seeds import SeedError, parse_seed

    if not isinstance(doc, dict):
        return None
    value = doc.get("seed_int")
    if value is None and isinstance(doc.get("world"), dict):
        value = doc["world"].get("seed")
    try:
        return parse_seed(value, "seed")
    except SeedError:
        return None


def _key_lock(key: str) -> threading.Lock:
    with _KEYS_LOCK:
        return _KEYS.setdefault(key, threading.Lock())


def build_cached(resolved, world_dir: Path, what: str) -> Path:
    """Build ``resolved`` into ``world_dir`` unless a complete build of the same config is
    there; one build per folder at a time (a thread lock and a file lock).  ``what`` names
    the world in a failure's one line."""
    from ..build import build

    world_dir = Path(world_dir)
    with _key_lock(str(world_dir)):
        if is_built(world_dir, resolved):
            return world_dir
        try:
            world_dir.parent.mkdir(parents=True, exist_ok=True)
            lock = open(world_dir.parent / f".{world_dir.name}.lock", "w")
        except OSError as error:
            raise WorldBuildError(f"{what}: cannot build at {world_dir}: {type(error).__name__}: "
                                  f"{error.strerror or error}") from error
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if not is_built(world_dir, resolved):
                    try:
                        build(resolved, progress=False)
                    except Exception as error:
                        raise WorldBuildError(f"{what}: the build failed: {type(error).__name__}: "
                                              f"{' '.join(str(error).split())[:300]}") from error
                    if not is_built(world_dir, resolved):
                        raise WorldBuildError(f"{what}: the build wrote no complete world at {world_dir}")
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    return world_dir


class WorldBuildError(RuntimeError):
    """A world could not be built (one line naming it)."""


def ensure_training_world(spec: WorldSpec, cache_dir: Path) -> Path:
    """The built world of ``spec`` under ``cache_dir`` (built on first use, then reused)."""
    import copy
    import dataclasses

    from omegaconf import OmegaConf

    cache_dir = Path(cache_dir).resolve()
    probe = resolve(spec.overrides(str(cache_dir)))
    out = cache_dir / world_key(probe)  # the key leaves out (and cluster) out
    cfg = copy.deepcopy(probe.cfg)
    OmegaConf.set_readonly(cfg, False)
    cfg.out = str(out)
    OmegaConf.set_readonly(cfg, True)
    return build_cached(dataclasses.replace(probe, cfg=cfg), out / spec.world_id,
                        f"seed_namespace={spec.namespace!r} world {spec.index} ({spec.family_id})")


# ----------------------------------------------------------------------------- evaluation panels


def panel_worlds(panel: str, scale: str, worlds_dir: str, seeds: Optional[str] = None,
                 release: str = "default", only: Optional[list] = None) -> list:
    """Build (or reuse by config digest) every world of ``panel`` at ``scale`` under
    ``worlds_dir``; returns [(world id, world folder)] in the panel's order.  Everything is
    composed and validated before the first build; errors name the parameter."""
    from .. import config
    from ..config_schema import ConfigError

    worlds_dir = os.path.abspath(str(worlds_dir))
    options = config.group_options("panel")
    if panel not in options:
        raise ParameterError(f"panel={panel!r}: unknown panel; valid: {', '.join(options)}")
    try:
        with _HYDRA:
            ids = config.validate_panel(config.compose([f"panel={panel}"], config_name="panel_config"))
    except ConfigError as error:
        raise ParameterError(f"panel={panel!r}: {error}") from None
    if only:
        unknown = [w for w in only if w not in ids]
        if unknown:
            raise ParameterError(f"panel_worlds={only!r}: {', '.join(unknown)} not in panel {panel}; valid: "
                                 f"{', '.join(ids)}")
        ids = [w for w in ids if w in only]
    resolved = []
    for world_id in ids:
        overrides = [f"world={world_id}", f"scale={scale}", f"out={worlds_dir}", "cluster=sync",
                     "cluster.progress=false"]
        if seeds:
            overrides.append(f"seeds={seeds}")
        try:
            probe = resolve(overrides)
            if getattr(probe, "kind", "biobank") == "biobank" and release != "default":
                probe = resolve(overrides + [f"release={release}"])
        except ConfigError as error:
            text = str(error)
            name = "seeds" if text.startswith(("world.seed", "seeds")) else "panel"
            raise ParameterError(f"{name}: world {world_id} of panel {panel}: {text}") from None
        resolved.append((world_id, probe))
    out = []
    for world_id, res in resolved:
        world_dir = Path(worlds_dir) / world_id
        build_cached(res, world_dir, f"panel={panel!r} world {world_id}")
        out.append((world_id, world_dir))
    return out
