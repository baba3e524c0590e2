"""What an evaluation runs: the config of ``python -m pipeline.evaluate`` and its plan.

The config is ``conf/evaluate_config.yaml`` on the schema :class:`EvaluateConfig`
(registered in Hydra's ConfigStore as ``base_evaluate_config`` by :func:`register`).
:func:`prepare` turns command-line overrides into a checked :class:`Plan` before any
compute: every world composed and validated as ``pipeline.build`` would (held-out worlds
need ``seeds=``), every agent entry parsed and checked against the kinds of the worlds
it plays, budgets, modes and trials checked, and each world folder already present
checked to hold a build of the same world-determining configuration.  Every problem is
one line (``ConfigError``) naming the field, the bad value and what is valid.

Agents (``agents=[...]``), one entry each:

``<name>``
    a reference agent of the world's kind, ``openai_chat``, ``<module>:<factory>`` or an
    installed ``drugtargetworld.agents`` entry point; its label is the name.  (``null`` on
    the command line is YAML's null: it names the null agent.)
``{label: <yours>, agent: <name>, options: {...}, max_concurrent: N}``
    the same under a label of the user's choosing, with the agent's options (as
    ``agent.<option>=`` of ``pipeline.episode``) and at most N of its episodes at once
    (a model endpoint's rate limit).  Two labels may run one agent with other options.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from omegaconf import MISSING, OmegaConf

from .. import __version__
from ..config_schema import ClusterConfig, ConfigError, OracleConfig, PanelConfig, ReleaseConfig, ScaleConfig

CONFIG_NAME = "evaluate_config"
#: The three budgets of Supplementary S3 (dollars).
BUDGETS = (0, 450_000, 2_000_000)
#: The screening kind's modes (pipeline.screening.episode.MODES).
MODES = ("limited", "unrestricted")
ISOLATION = ("auto", "require", "off")
LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,63}$")
ENTRY_KEYS = ("label", "agent", "options", "max_concurrent")
#: Overrides handed to every world's build config (the rest are the evaluation's own).
WORLD_KEYS = ("scale", "cluster", "release", "oracle", "paper_compat", "seeds")
#: Option names whose values evaluation.json shows as "<redacted>" (the digest still covers them).
SECRET = re.compile(r"key|token|secret|password", re.I)


@dataclass
class EvaluateConfig:
    """``python -m pipeline.evaluate`` (conf/evaluate_config.yaml).  The evaluation's own
    fields are ``Any`` and checked by :func:`prepare`, so that every error is one line in
    the evaluation's words; scale, cluster, release, oracle, paper_compat and seeds are the
    build's and go to every world's config."""

    panel: Optional[PanelConfig] = None
    worlds: Any = None
    scale: ScaleConfig = MISSING
    cluster: ClusterConfig = MISSING
    release: ReleaseConfig = MISSING
    oracle: OracleConfig = field(default_factory=OracleConfig)
    paper_compat: bool = False
    seeds: Optional[str] = None
    worlds_out: Any = "./worlds"
    out: Any = "./evaluation"
    agents: Any = MISSING
    budgets: Any = None
    modes: Any = None
    trials: Any = 1
    turns: Any = None
    timeout: Any = None
    isolation: Any = None
    max_episodes: Any = None
    cores_per_worker: Any = "auto"
    jobs: Any = 4


TOP_KEYS = tuple(EvaluateConfig.__dataclass_fields__)


def register() -> None:
    """Store the schema in Hydra's ConfigStore (idempotent; the core configs too)."""
    from hydra.core.config_store import ConfigStore

    from .. import config

    config.register_configs()
    ConfigStore.instance().store(name="base_evaluate_config", node=EvaluateConfig)


# ----------------------------------------------------------------------------- agents


@dataclass(frozen=True)
class AgentEntry:
    """One agent of the evaluation, under its label."""

    label: str
    name: str  #: what registry.create makes: a reference agent, openai_chat, module:factory, an entry point
    options: dict = field(default_factory=dict)
    max_concurrent: Optional[int] = None

    def public(self) -> dict:
        """The entry as evaluation.json shows it (secret-looking option values redacted)."""
        options = {k: ("<redacted>" if SECRET.search(k) and v is not None else v) for k, v in self.options.items()}
        return {"agent": self.name, "options": options, "max_concurrent": self.max_concurrent}


def _show(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _plain(value: Any) -> Any:
    if OmegaConf.is_config(value):
        return OmegaConf.to_container(value, resolve=True)
    return value


def parse_agents(value: Any) -> list[AgentEntry]:
    """The ``agents`` list as entries, labels unique (see the module docstring)."""
    value = _plain(value)
    valid = ("a list of agents: names (null, truth, cis_mr, openai_chat, my_pkg.agent:make, ...) or "
             "{label: <yours>, agent: <name>, options: {...}, max_concurrent: N}")
    if not isinstance(value, list) or not value:
        raise ConfigError(f"agents: {_show(value)} is invalid; valid: {valid}")
    entries, seen = [], {}
    for i, item in enumerate(value):
        where = f"agents[{i}]"
        if item is None:
            item = "null"  # YAML reads the null agent's name as null
        if isinstance(item, str):
            entry = AgentEntry(item, item)
        elif isinstance(item, dict):
            unknown = sorted(set(item) - set(ENTRY_KEYS))
            if unknown:
                raise ConfigError(f"{where}.{unknown[0]}: no such key; valid: {', '.join(ENTRY_KEYS)}")
            name = item.get("agent")
            if name is None and "agent" in item:
                name = "null"
            if not isinstance(name, str) or not name:
                raise ConfigError(f"{where}.agent: {_show(name)} is invalid; valid: the agent to run (a reference "
                                  "agent, openai_chat, <module>:<factory> or an entry point)")
            label = item.get("label", name)
            if label is None and "label" in item:
                label = "null"  # YAML's null, as for names
            options = item.get("options") or {}
            if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
                raise ConfigError(f"{where}.options: {_show(options)} is invalid; valid: a mapping of the agent's "
                                  "option names to values")
            limit = item.get("max_concurrent")
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
                raise ConfigError(f"{where}.max_concurrent: {_show(limit)} is invalid; valid: an integer >= 1 "
                                  "(episodes of this agent at once) or null")
            entry = AgentEntry(label, name, dict(options), limit)
        else:
            raise ConfigError(f"{where}: {_show(item)} is invalid; valid: an agent name or a mapping with label, "
                              "agent, options, max_concurrent")
        if not isinstance(entry.label, str) or not LABEL.match(entry.label):
            raise ConfigError(f"{where}.label: {_show(entry.label)} is invalid; valid: 1-64 characters of letters, "
                              "digits and _ . : + - (starting with a letter or digit)")
        if entry.label in seen:
            raise ConfigError(f"agents: the label {entry.label!r} is used twice (agents[{seen[entry.label]}] and "
                              f"{where}); valid: one label per agent (give a mapping entry its own label: "
                              f"{{label: {entry.label}-2, agent: {entry.name}, options: ...}})")
        seen[entry.label] = i
        entries.append(entry)
    return entries


def _source_digest(module: str) -> Optional[str]:
    """SHA-256 over the source files of ``module``'s top-level package (or module file), found
    without importing anything (importing would run the agent's code in this process)."""
    top = module.split(".")[0]
    try:
        spec = importlib.util.find_spec(top) if top else None  # a top-level name: nothing is executed
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    roots = [Path(p) for p in (spec.submodule_search_locations or []) if p and os.path.isdir(p)]
    files = sorted(f for root in roots for f in root.rglob("*.py")) if roots else \
        ([Path(spec.origin)] if spec.origin and os.path.isfile(spec.origin) else [])
    if not files:
        return None
    digest = hashlib.sha256()
    for f in files:
        digest.update(str(f.name).encode() + b"\0" + f.read_bytes() + b"\0")
    return "sha256:" + digest.hexdigest()


def code_identity(name: str) -> Optional[str]:
    """What identifies an agent's code beyond the package version: for a ``module:factory``
    agent the SHA-256 of its top-level package's sources, for an entry point its target,
    distribution and version and the same digest; None for the project's own agents."""
    if ":" in name:
        return _source_digest(name.partition(":")[0])
    from ..agents import registry

    try:
        found = registry.entry_points().get(name)
    except Exception:  # a broken installation: the agent's creation says why
        return None
    if found is None:
        return None
    dist = getattr(found, "dist", None)
    return (f"{found.value} ({getattr(dist, 'name', '?')} {getattr(dist, 'version', '?')}) "
            f"{_source_digest(found.value.partition(':')[0].strip()) or ''}").strip()


# ----------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class World:
    """One world of the evaluation."""

    id: str
    kind: str
    archetype: Optional[str]
    dir: str  #: <worlds_out>/<id>
    config_digest: str  #: the world-determining config's SHA-256 (pipeline.buildrecord.config_digest)
    resolved: Any = field(repr=False)  #: pipeline.config.Resolved (the build's config; it holds the seed)
    present: bool = False  #: a complete build of this config is in dir (its manifests are verified before use)


@dataclass
class Plan:
    """A checked evaluation, ready to run."""

    overrides: list
    out: str
    worlds_out: str
    worlds: list  #: [World]
    agents: list  #: [AgentEntry]
    budgets: list  #: dollars (floats) for biobank worlds
    modes: list  #: screening modes
    trials: int
    turns: Optional[int]
    timeout: Optional[float]
    isolation: Optional[str]
    paper_compat: bool
    max_episodes: Optional[int]
    jobs: int
    cores_per_worker: Optional[int]  #: pin each local worker's episodes to this many cores (None: no pinning)
    cluster: Any  #: the cluster config node
    progress: bool
    harness_version: str
    agent_digests: dict  #: label -> agent configuration digest

    def conditions(self, world: World) -> list:
        return list(self.budgets) if world.kind == "biobank" else list(self.modes)


def harness_version() -> str:
    """The transcript format of the episode core and the package version."""
    from ..harness.core import TRANSCRIPT_FORMAT

    return f"{TRANSCRIPT_FORMAT}+drugtargetworld-{__version__}"


def agent_digest(entry: AgentEntry, settings: dict) -> str:
    """SHA-256 of what makes an agent's episodes: its name, options, code identity and the
    episode settings (turns, timeout, isolation, paper_compat).  ``max_concurrent`` is left
    out: it changes when episodes run, not what they do."""
    doc = {"agent": entry.name, "options": entry.options, "code": code_identity(entry.name), "settings": settings}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def _local_path(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name}: {_show(value)} is invalid; valid: a local folder")
    text = value.strip()
    if text.startswith("file://"):
        text = text[len("file://"):]
    elif "://" in text:
        raise ConfigError(f"{name}: {text!r} is not a local folder; valid: a local folder (episodes run in folders "
                          "the harness and the sandbox open directly)")
    path = Path(text).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{name}: {path} exists and is not a folder; valid: a folder")
    return str(path)


def _int(value: Any, name: str, lo: int, why: str, optional: bool = False) -> Optional[int]:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ConfigError(f"{name}: {_show(value)} is invalid; valid: an integer >= {lo} ({why})"
                          + (" or null" if optional else ""))
    return int(value)


def parse_budgets(value: Any) -> Optional[list]:
    value = _plain(value)
    if value is None:
        return None
    valid = f"a list drawn from the three budgets of S3: {', '.join(map(str, BUDGETS))}"
    if not isinstance(value, list) or not value:
        raise ConfigError(f"budgets: {_show(value)} is invalid; valid: {valid}")
    out = []
    for b in value:
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not math.isfinite(b) or b not in BUDGETS:
            raise ConfigError(f"budgets: {_show(b)} is not one of the three budgets; valid: {valid}")
        if float(b) in out:
            raise ConfigError(f"budgets: {_show(b)} is given twice; valid: each budget once")
        out.append(float(b))
    return sorted(out)


def parse_modes(value: Any) -> Optional[list]:
    value = _plain(value)
    if value is None:
        return None
    valid = f"a list drawn from the screening modes: {', '.join(MODES)}"
    if not isinstance(value, list) or not value:
        raise ConfigError(f"modes: {_show(value)} is invalid; valid: {valid}")
    out = []
    for m in value:
        if m not in MODES:
            raise ConfigError(f"modes: {_show(m)} is not a screening mode; valid: {valid}")
        if m in out:
            raise ConfigError(f"modes: {m!r} is given twice; valid: each mode once")
        out.append(m)
    return [m for m in MODES if m in out]


def _check_override_keys(overrides: list) -> None:
    from .. import config

    for ov in config.parse_overrides(overrides):
        key = ov.key_or_group
        top = key.split(".")[0].split("/")[0]
        if top == "world":
            raise ConfigError(f"{ov.input_line}: an evaluation takes its worlds from panel=<id> or worlds=[<id>,...]; valid: "
                              f"{', '.join(TOP_KEYS)}")
        if top not in TOP_KEYS or (ov.is_add() and "." not in key):
            raise ConfigError(f"{ov.input_line}: no such field of pipeline.evaluate; valid: {', '.join(TOP_KEYS)} "
                              "(and the fields of scale, cluster, release, oracle)")


def world_overrides(overrides: list, worlds_out: str) -> list:
    """The overrides every world's build config gets: the build's own keys, and out=<worlds_out>."""
    from .. import config

    passed = [ov for ov, parsed in zip(overrides, config.parse_overrides(overrides))
              if parsed.key_or_group.split(".")[0] in WORLD_KEYS]
    return [*passed, f"out={worlds_out}"]


def read_build_record(world_dir: Path) -> Optional[dict]:
    """The world's build-record.json (None: absent or unreadable); another format_version is a ConfigError."""
    from ..buildrecord import read

    return read(world_dir, error=ConfigError)


def _world_state(world_id: str, world_dir: Path, digest: str, resolved) -> bool:
    """Whether ``world_dir`` holds a complete build of the config with ``digest`` (False: absent or
    unfinished, to be built); a complete build of another config is an error."""
    from .. import bundle

    complete = (world_dir / bundle.RELEASE / bundle.MANIFEST).is_file() and \
        (world_dir / bundle.SEALED / bundle.MANIFEST).is_file()
    if not complete:
        return False
    record = read_build_record(world_dir)
    built = record.get("config_sha256") if isinstance(record, dict) else None
    if built is None:
        raise ConfigError(f"world {world_id}: {world_dir} holds a build without a readable build-record.json, so its "
                          "configuration cannot be checked; valid: copy the world with its build-record.json, remove "
                          f"{world_dir} to rebuild it, or choose another worlds_out=")
    if built != digest:
        differs = config_difference(world_dir, resolved)
        raise ConfigError(f"world {world_id}: {world_dir} holds a build of another configuration ("
                          + (f"{differs}; " if differs else "")
                          + f"config sha256 {built[:12]}..., this evaluation's {digest[:12]}...); valid: "
                          f"worlds_out=<another folder>, the options it was built with, or remove {world_dir}")
    return True


def _flat(doc: Any, prefix: str = "") -> dict:
    if isinstance(doc, dict):
        out = {}
        for key, value in doc.items():
            out.update(_flat(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: doc}


def config_difference(world_dir: Path, resolved, shown: int = 3) -> str:
    """The first fields in which the build in ``world_dir`` (its sealed/world.yaml) differs from
    ``resolved``, as ``field: built X, wanted Y`` (seeds never shown or compared)."""
    import yaml

    from .. import bundle, buildrecord, config

    try:
        built = yaml.safe_load((world_dir / bundle.SEALED / "world.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return ""
    if not isinstance(built, dict):
        return ""
    wanted = buildrecord.world_determining(resolved.cfg)
    a, b = _flat(built), _flat(wanted)
    keys = [k for k in sorted(set(a) | set(b)) if "seed" not in k and k not in config.RECORD_ONLY and a.get(k) != b.get(k)]
    text = "; ".join(f"{k}: built {_show(a.get(k))}, wanted {_show(b.get(k))}" for k in keys[:shown])
    return text + (f" and {len(keys) - shown} more" if len(keys) > shown else "")


def prepare(overrides: list) -> Plan:
    """Compose and check an evaluation before any compute (see the module docstring)."""
    from .. import buildrecord, config, kinds
    from ..agents import registry

    overrides = list(overrides)
    register()
    _check_override_keys(overrides)
    cfg = config.compose(overrides, config_name=CONFIG_NAME)
    if OmegaConf.is_missing(cfg, "agents"):
        raise ConfigError("agents: none chosen; valid: agents=[<agent>,...], e.g. agents=[null,truth,cis_mr] or "
                          "agents=[{label:gpt-a,agent:openai_chat,options:{model:m,base_url:http://host:8000/v1}}]")
    agents = parse_agents(cfg.agents)

    panel = cfg.panel
    listed = _plain(cfg.worlds)
    known = config.group_options("world")
    if panel is not None and listed is not None:
        raise ConfigError(f"worlds: {_show(listed)} given with panel={panel.id}; valid: one of panel=<id> or "
                          "worlds=[<id>,...] (panel.worlds=[...] picks worlds of the panel)")
    if panel is None and listed is None:
        raise ConfigError(f"panel: none chosen; valid: panel=<id> with <id> one of "
                          f"{', '.join(config.group_options('panel'))}, or worlds=[<id>,...]")
    name = "panel.worlds" if panel is not None else "worlds"
    ids = _plain(panel.worlds) if panel is not None else listed
    if isinstance(ids, str):
        ids = [ids]
    if not isinstance(ids, list) or not ids or not all(isinstance(w, str) and w for w in ids):
        raise ConfigError(f"{name}: {_show(ids)} is invalid; valid: a non-empty list of world ids")
    for w in ids:
        if w not in known:
            raise ConfigError(f"{name}: unknown world {w!r}; valid: {', '.join(known)}")
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{name}: {_show(ids)} lists a world twice; valid: each world once")

    trials = _int(_plain(cfg.trials), "trials", 1, "episodes per agent, world and budget or mode")
    turns = _int(_plain(cfg.turns), "turns", 1, "the turn limit", optional=True)
    timeout = _plain(cfg.timeout)
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) \
                or timeout <= 0:
            raise ConfigError(f"timeout: {_show(timeout)} is invalid; valid: seconds per program > 0, or null")
        timeout = float(timeout)
    isolation = _plain(cfg.isolation)
    if isolation is not None and isolation not in ISOLATION:
        raise ConfigError(f"isolation: {_show(isolation)} is invalid; valid: {', '.join(ISOLATION)} or null "
                          "(auto for the project's reference agents, require for any other)")
    max_episodes = _int(_plain(cfg.max_episodes), "max_episodes", 0, "episodes to play in this run", optional=True)
    jobs = _int(_plain(cfg.jobs), "jobs", 1, "client threads driving world builds")
    cores = _plain(cfg.cores_per_worker)
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cores == "auto":
        # The command's own local cluster: each worker's episodes on their share of the cores, so that
        # the agents' numerical libraries (one thread per core they see) do not oversubscribe the machine.
        workers = cfg.cluster.n_workers or os.cpu_count() or 1
        cores = max(1, available // int(workers)) if cfg.cluster.kind == "local" and hasattr(os, "sched_setaffinity") \
            else None
    else:
        cores = _int(cores, "cores_per_worker", 1, "cores each worker's episodes run on, or auto", optional=True)
    if cores is not None and _plain(cfg.cores_per_worker) != "auto":
        if cfg.cluster.kind != "local":
            raise ConfigError(f"cores_per_worker: {cores} with cluster={cfg.cluster.kind}; valid: null, or a number of "
                              "cores with cluster=local (the workers of the command's own cluster are pinned)")
        if cores > available:
            raise ConfigError(f"cores_per_worker: {cores} but this machine has {available} core(s); valid: 1 to "
                              f"{available}, or null")
    budgets, modes = parse_budgets(cfg.budgets), parse_modes(cfg.modes)
    out = _local_path(cfg.out, "out")
    worlds_out = _local_path(cfg.worlds_out, "worlds_out")

    base = world_overrides(overrides, worlds_out)
    worlds = []
    for w in ids:
        resolved = config.load([f"world={w}", *base])  # validated as the build validates it (seeds included)
        kind = kinds.for_resolved(resolved).name
        archetype = resolved.cfg.world.get("archetype") if kind == "biobank" else None
        world_dir = Path(worlds_out) / w
        digest = buildrecord.config_digest(resolved.cfg)
        if Path(out) == world_dir or Path(out).is_relative_to(world_dir):
            raise ConfigError(f"out: {out} is inside the world folder {world_dir}; valid: a folder outside every world")
        worlds.append(World(w, kind, None if archetype is None else str(archetype), str(world_dir), digest, resolved,
                            _world_state(w, world_dir, digest, resolved)))
    kinds_used = sorted({w.kind for w in worlds})
    if budgets is not None and "biobank" not in kinds_used:
        raise ConfigError(f"budgets: {_show(_plain(cfg.budgets))} given but no world is a biobank world (a screening "
                          "world's label budget is part of the world); valid: modes=[limited,unrestricted]")
    if modes is not None and "screening" not in kinds_used:
        raise ConfigError(f"modes: {_show(_plain(cfg.modes))} given but no world is a screening world; valid: "
                          f"budgets=[{','.join(map(str, BUDGETS))}]")
    budgets = (budgets if budgets is not None else [float(b) for b in BUDGETS]) if "biobank" in kinds_used else []
    modes = (modes if modes is not None else list(MODES)) if "screening" in kinds_used else []

    # Every agent must be one every kind it meets can make, with options it takes.
    needs_isolation = False
    for entry in agents:
        checked = False  # an agent's preflight (a model endpoint's check request) runs once
        for kind in kinds_used:
            try:
                spec = registry.specs(kind).get(entry.name)
            except registry.AgentError as error:
                raise ConfigError(str(error)) from None
            reference = spec is not None and spec.reference
            if not reference:
                needs_isolation = True
                if isolation in ("auto", "off"):
                    raise ConfigError(f"isolation={isolation}: agent {entry.label} ({entry.name}) is not the "
                                      "project's own code; it always runs with isolation=require")
            if spec is not None:
                unknown = sorted(set(entry.options) - set(spec.options))
                if unknown:
                    raise ConfigError(f"agents: {entry.label}: unknown option {unknown[0]!r} of agent {entry.name}; "
                                      f"valid: {', '.join(sorted(spec.options)) or 'none'}")
                if spec.privileged:
                    continue  # made on the worker, beside the world's sealed bundle
            probe = _probe(kind, entry)  # an external agent is made in its own sandbox, then closed
            try:
                checked = checked or _preflight(entry, probe)
            finally:
                _close(probe)
    if needs_isolation or isolation == "require":
        from ..harness.sandbox import isolation_status

        ok, why = isolation_status()
        if not ok:
            raise ConfigError(f"isolation: agents that are not the project's own run only isolated, and this machine "
                              f"cannot isolate ({why}); valid: reference agents only, or a machine with bubblewrap")

    settings = {"turns": turns, "timeout": timeout, "isolation": isolation, "paper_compat": bool(cfg.paper_compat)}
    cluster = worlds[0].resolved.cfg.cluster
    return Plan(overrides=overrides, out=out, worlds_out=worlds_out, worlds=worlds, agents=agents, budgets=budgets,
                modes=modes, trials=trials, turns=turns, timeout=timeout, isolation=isolation,
                paper_compat=bool(cfg.paper_compat), max_episodes=max_episodes, jobs=jobs, cores_per_worker=cores,
                cluster=cluster,
                progress=bool(cluster.progress), harness_version=harness_version(),
                agent_digests={e.label: agent_digest(e, settings) for e in agents})


def _probe(kind: str, entry: AgentEntry):
    """Make the agent once in this process (not privileged ones), to refuse a bad one before compute."""
    from ..agents import registry

    try:
        return registry.create(kind, entry.name, entry.options, network=True)
    except registry.AgentError as error:
        raise ConfigError(f"agents: {entry.label}: {error}") from None
    except Exception as error:  # a factory's own failure
        raise ConfigError(f"agents: {entry.label}: {type(error).__name__}: {error}") from None


def _close(made) -> None:
    close = getattr(made.agent, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # a probe's cleanup never stops the evaluation
            pass


def _preflight(entry: AgentEntry, made) -> bool:
    """The agent's own check before any compute (a model endpoint answering), if it has one."""
    check = getattr(made.agent, "preflight", None)
    if callable(check):
        try:
            problem = check()
        except Exception as error:
            problem = f"{type(error).__name__}: {error}"
        if problem:
            raise ConfigError(f"agents: {entry.label}: {problem}")
    return True


__all__ = ["AgentEntry", "BUDGETS", "CONFIG_NAME", "EvaluateConfig", "MODES", "Plan", "World", "agent_digest",
           "harness_version", "parse_agents", "parse_budgets", "parse_modes", "prepare", "register"]
