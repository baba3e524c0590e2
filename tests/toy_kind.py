"""A minimal second kind of world, living in the tests, to prove the world-kind seam
(``pipeline.kinds``): a few features and an outcome released, one feature the
hidden driver, a trivial oracle (a feature's true effect with assay noise) and a
scorer (the driver named or not), one scripted episode in the project's sandbox.

Nothing here touches the biobank kind; everything goes through the seam's hooks
(config schema, validation, build, scorer, episode, validation, audit).
"""
from __future__ import annotations

import json
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from pipeline import bundle, kinds, seeds, streams
from pipeline.agents.base import AgentSpec, ScriptedAgent
from pipeline.agents.tools import ToolSpec
from pipeline.harness.kind import CallOutcome, EpisodeError, KindEpisode, TurnOutcome
from pipeline.ledger import JsonlLedger
from pipeline.config import ConfigError
from pipeline.manifest import build_manifest
from pipeline.outputs import Output
from pipeline.writers.parquet import table_bytes

NAME = "toy"
EFFECT = 0.8
ORACLE_SD = 0.05
FEATURES, OUTCOME = "features", "outcome"
PROMPT = ("RELEASE holds features.parquet and outcome.parquet (indexed by subject_id). One feature drives the "
          "outcome; submit({'driver': <feature name>}).")

DRAWS = streams.register("toy/draws", "the toy world's features, driver and outcome noise", "world", world_kind=NAME)
ORACLE = streams.register("toy/oracle", "the toy oracle's assay noise for one feature", "protein", world_kind=NAME)


@dataclass
class ToyWorldConfig:
    kind: str = NAME
    id: str = "toy-01"
    seed: str = "0x" + "5eed" * 8
    n: int = 300  #: participants
    n_features: int = 6


@dataclass(frozen=True)
class ToyResolved:
    cfg: Any
    seed: int
    kind: str = NAME


def register_schema(cs) -> None:
    cs.store(group="world", name="toy-01", node=ToyWorldConfig)


def is_kind(cfg) -> bool:
    return OmegaConf.select(cfg, "world.kind", default=None) == NAME


def validate(cfg, seed_file_text=None) -> ToyResolved:
    w = cfg.world
    if not 10 <= int(w.n) <= 100_000:
        raise ConfigError(f"world.n: {w.n} is invalid; valid: an integer in [10, 100000]")
    if not 2 <= int(w.n_features) <= 100:
        raise ConfigError(f"world.n_features: {w.n_features} is invalid; valid: an integer in [2, 100]")
    OmegaConf.set_readonly(cfg, True)
    return ToyResolved(cfg, seeds.parse_seed(w.seed))


def _read_truth(sealed_dir) -> dict | None:
    try:
        truth = bundle.read_sealed(sealed_dir, bundle.TRUTH)
    except (OSError, ValueError):
        return None
    return truth if isinstance(truth, dict) else None


def is_sealed(sealed_dir) -> bool:
    truth = _read_truth(sealed_dir)
    return truth is not None and truth.get("kind") == NAME


def is_world(world_dir) -> bool:
    return is_sealed(os.path.join(str(world_dir), bundle.SEALED))


def build(resolved: ToyResolved, executor=None, progress: bool = True) -> dict:
    cfg = resolved.cfg
    n, k = int(cfg.world.n), int(cfg.world.n_features)
    output = Output(cfg.out, cfg.world.id)
    for folder in (output.release, output.sealed):
        output.rm(folder)
        output.makedirs(folder)
    rng = seeds.stream(resolved.seed, DRAWS)
    x = rng.standard_normal((n, k))
    driver = int(rng.integers(k))
    y = EFFECT * x[:, driver] + np.sqrt(1 - EFFECT ** 2) * rng.standard_normal(n)
    ids = pd.Index([f"T{i:05d}" for i in range(n)], name="subject_id", dtype=object)
    names = [f"f{j}" for j in range(k)]
    output.write_bytes(posixpath.join(output.release, FEATURES + bundle.TABLE_SUFFIX),
                       table_bytes(pd.DataFrame(x, index=ids, columns=names)))
    output.write_bytes(posixpath.join(output.release, OUTCOME + bundle.TABLE_SUFFIX),
                       table_bytes(pd.DataFrame({"outcome": y}, index=ids)))
    output.write_json(posixpath.join(output.sealed, bundle.TRUTH),
                      {"kind": NAME, "world_id": cfg.world.id, "driver": names[driver], "features": names,
                       "oracle_key": str(int(seeds.block_key(resolved.seed, ORACLE)))})
    output.write_json(posixpath.join(output.sealed, bundle.MANIFEST),
                      build_manifest(output, output.sealed, extra={"world_id": cfg.world.id, "bundle": bundle.SEALED}))
    manifest = build_manifest(output, output.release, extra={"bundle": bundle.RELEASE})
    output.write_json(posixpath.join(output.release, bundle.MANIFEST), manifest)
    return {"world": cfg.world.id, "release": output.release, "sealed": output.sealed,
            "files": manifest["n_files"], "bytes": manifest["total_bytes"]}


def experiment(sealed_dir, feature: str) -> float:
    """The oracle: a feature's true effect on the outcome, with assay noise keyed by the sealed oracle key."""
    truth = _read_truth(sealed_dir)
    q = truth["features"].index(feature)
    effect = EFFECT if feature == truth["driver"] else 0.0
    return effect + ORACLE_SD * float(seeds.stream(int(truth["oracle_key"]), ORACLE, q).standard_normal())


def score_episode(sealed_dir, work_dir, ledger=None) -> dict:
    truth = _read_truth(sealed_dir)
    path = Path(work_dir) / "submission.json"
    try:  # a regular file only: the agent may leave a FIFO, a link or a folder there
        submitted = json.loads(path.read_bytes()) if path.is_file() and not path.is_symlink() else {}
    except (OSError, ValueError):
        submitted = {}
    named = submitted.get("driver") if isinstance(submitted, dict) else None
    score = 1.0 if named == truth["driver"] else 0.0
    return {"kind": NAME, "world_id": truth["world_id"], "driver_named": named == truth["driver"], "score": score,
            "total": 100.0 * score}


#: The scripted agent: the feature most correlated with the outcome (the harness's tools: RELEASE, submit()).
AGENT_CODE = """
x = pd.read_parquet(os.path.join(RELEASE, "features.parquet"))
y = pd.read_parquet(os.path.join(RELEASE, "outcome.parquet"))["outcome"]
best = x.corrwith(y).abs().idxmax()
print("driver:", best)
submit({"driver": best})
"""


class ToyAgent(ScriptedAgent):
    """The toy kind's reference agent: one program, then the kind's fallback (submit whatever WORK holds)."""

    FALLBACK = "submit()\n"

    def programs(self, info):
        return [AGENT_CODE]


class ToyEpisode(KindEpisode):
    """The toy kind's half of an episode on the shared core: one tool (submit), the prompt, the scorer.
    The prelude is the biobank one (its submit(dict) records the claim in the channel)."""

    kind = NAME
    default_turns = 3
    default_timeout = 120.0
    options = {}

    def configure(self, options: dict) -> None:
        if options.get("budget") is not None:
            raise EpisodeError("budget: not an option of a toy world; valid: omit budget")
        self.claim = None

    def open(self, ledger_path) -> None:
        self.ledger = JsonlLedger(ledger_path, header={"format": "toy-ledger/1"})

    def tools(self) -> list:
        return [ToolSpec("submit", "Name the driving feature and end the episode.",
                         {"type": "object", "properties": {"driver": {"type": "string"}}, "required": ["driver"]},
                         ends_episode=True)]

    def prompts(self, session) -> tuple:
        return PROMPT, f"Begin. RELEASE = {session.sandbox.agent_paths['RELEASE']!r}"

    def format_hint(self) -> str:
        return "Reply with one fenced Python block."

    def remaining(self) -> float:
        return 0.0

    def status(self, session, turns_left: int) -> str:
        return f"Turns remaining: {turns_left}."

    def call(self, session, call, args) -> CallOutcome:
        if call.name != "submit" or not isinstance(args.get("driver"), str):
            return CallOutcome("Refused: submit(driver) takes a feature name.", refused=True)
        return CallOutcome("Submitted.", queued={"driver": args["driver"]}, ends="submitted")

    def after_turn(self, session, turn, run, queued) -> TurnOutcome:
        claims = list(queued)
        if run is not None and "submit.json" in run.channel:
            try:
                claims.append(json.loads(run.channel_file("submit.json")[0]))
            except ValueError:
                pass
        ends = None
        for claim in claims:
            if isinstance(claim, dict):
                session.write("submission.json", json.dumps(claim))
                self.ledger.append({"turn": turn, "submitted": claim})
                self.claim, ends = claim, "submitted"
        return TurnOutcome(sections=[("toy", [f"claimed {self.claim}" if self.claim else "no claim yet"])],
                           status=self.status(session, session.max_turns - turn), ends=ends)

    def score(self, session) -> tuple:
        return score_episode(self.sealed, session.work), "work"

    def crash_score(self, reason: str) -> dict:
        return {"kind": NAME, "score": 0.0, "total": 0.0, "details": {"runner_crash": reason}}


def validate_main(argv: list) -> int:
    """The driver correlates with the outcome beyond 4 standard errors; no other feature does."""
    world = Path(argv[0])
    truth = _read_truth(world / bundle.SEALED)
    x = pd.read_parquet(world / bundle.RELEASE / (FEATURES + bundle.TABLE_SUFFIX))
    y = pd.read_parquet(world / bundle.RELEASE / (OUTCOME + bundle.TABLE_SUFFIX))["outcome"]
    z = x.corrwith(y) * np.sqrt(len(y))  # r / SE(r) under the null, SE = 1/sqrt(n)
    others = z.drop(truth["driver"]).abs()
    ok = bool(abs(z[truth["driver"]]) > 4 and (others < 4).all())
    print(json.dumps({"passed": ok, "z": {k: round(float(v), 2) for k, v in z.items()}}))
    return 0 if ok else 1


def audit_main(argv: list) -> int:
    """The release is its manifest's, and neither the driver's claim nor the world id appears in it."""
    world = Path(argv[0])
    truth = _read_truth(world / bundle.SEALED)
    needles = [json.dumps({"driver": truth["driver"]}).encode(), truth["world_id"].encode()]
    leaked = [p.name for p in (world / bundle.RELEASE).iterdir() if any(n in p.read_bytes() for n in needles)]
    stray = bundle.verify(world / bundle.RELEASE)
    passed = not leaked and not stray
    print(json.dumps({"passed": passed, "leaked_in": leaked, "not_the_manifest": stray}))
    return 0 if passed else 1


KIND = kinds.WorldKind(
    name=NAME, register_schema=register_schema, is_kind=is_kind, validate=validate, build=build,
    warm_up=lambda: None, is_world=is_world, is_sealed=is_sealed, score_episode=score_episode,
    episode=ToyEpisode, validate_main=validate_main, audit_main=audit_main,
    agents=lambda: {"scripted": AgentSpec("scripted", ToyAgent, reference=True, description="the most correlated feature")},
)
