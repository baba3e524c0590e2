"""One contract for every kind of world (``pipeline.kinds``): the biobank kind, the screening
kind and the tests' toy kind are each held to the same properties, so that a property the
harness or the build promises cannot hold for one kind and silently fail for another.

* a build is byte-identical on the synchronous scheduler and on a LocalCluster with worker
  processes, and an interrupted build leaves no manifest and resumes to the same bytes;
* both manifests verify, and the release carries nothing of the sealed bundle;
* the kind's leak audit catches a needle planted in the release;
* the kind's scorer never raises on a fuzzed work folder;
* every exit path of an episode is scored, with score.json written;
* nothing readable inside the sandbox names the world or a folder the user chose.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from pipeline import bundle, config, kinds
from pipeline.agents.base import Agent
from pipeline.build import build
from pipeline.harness import isolation_status, run_episode

import toy_kind
from faults import fail_on_call
from worlds import digest_tree

ISOLATED, REASON = isolation_status()
KINDS = ("biobank", "screening", "toy")
#: The overrides of each kind's conformance world (the session's worlds where they exist).
OVERRIDES = {
    "biobank": ["world=all-biases", "scale=tiny", "release=noimaging"],
    "screening": ["world=screening-01", "scale=tiny", "world.conformations=1000"],
    "toy": ["world=toy-01"],
}
FINISH = {"biobank": "submit({'nominated': [], 'directions': {}, 'outcome_alignment': {}, 'rejected': [], "
                     "'abstentions': []})",
          "screening": "finish()", "toy": "submit({'driver': 'f0'})"}
EXTRA = {"biobank": {"budget": 0}, "screening": {"mode": "unrestricted"}, "toy": {}}


@pytest.fixture(scope="module")
def toy_registered():
    kinds.register(toy_kind.KIND)
    try:
        yield
    finally:
        kinds.unregister(toy_kind.NAME)


@pytest.fixture(scope="module")
def toy_world(toy_registered, tmp_path_factory):
    out = tmp_path_factory.mktemp("toy-conformance")
    build(config.load([*OVERRIDES["toy"], f"out={out}"]), progress=False)
    return str(out / "toy-01")


@pytest.fixture(params=KINDS)
def world(request, toy_registered):
    """(kind, the kind's conformance world, built on the synchronous scheduler)."""
    name = request.param
    if name == "biobank":
        return name, request.getfixturevalue("tiny_world_noimaging")
    if name == "screening":
        return name, request.getfixturevalue("tiny_screening")
    return name, request.getfixturevalue("toy_world")


def _load(kind: str, out) -> object:
    extra = [] if kind == "toy" else ["cluster=sync", "cluster.progress=false"]
    return config.load([*OVERRIDES[kind], *extra, f"out={out}"])


# ----------------------------------------------------------------------------- builds


def test_a_build_is_the_same_bytes_on_a_cluster_of_worker_processes(world, tmp_path, local_cluster):
    kind, world_dir = world
    assert local_cluster.n_workers == 2 and local_cluster.kind == "dask"
    resolved = _load(kind, tmp_path / "cluster")
    build(resolved, executor=local_cluster, progress=False)
    assert digest_tree(tmp_path / "cluster" / Path(world_dir).name) == digest_tree(world_dir)


def test_an_interrupted_build_leaves_no_manifest_and_resumes_to_the_same_bytes(world, tmp_path, monkeypatch):
    from pipeline import outputs

    kind, world_dir = world
    real, written = outputs.Output.write_bytes, []

    def dies_midway(self, path, data):
        if len(written) == 4:
            raise RuntimeError("killed")
        written.append(path)
        return real(self, path, data)

    monkeypatch.setattr(outputs.Output, "write_bytes", dies_midway)
    with pytest.raises(Exception, match="killed"):
        build(_load(kind, tmp_path / "w"), progress=False)
    target = tmp_path / "w" / Path(world_dir).name
    assert not (target / bundle.RELEASE / bundle.MANIFEST).exists()  # an interrupted build never looks complete
    monkeypatch.setattr(outputs.Output, "write_bytes", real)
    build(_load(kind, tmp_path / "w"), progress=False)
    assert digest_tree(target) == digest_tree(world_dir)


def test_both_manifests_verify_and_the_release_holds_nothing_sealed(world):
    kind, world_dir = world
    release, sealed = Path(world_dir) / bundle.RELEASE, Path(world_dir) / bundle.SEALED
    assert bundle.verify(release) == [] and bundle.verify(sealed, bundle.SEALED) == []
    manifest = json.loads((release / bundle.MANIFEST).read_text())
    assert "world_id" not in manifest and "seed" not in json.dumps(manifest).lower()
    sealed_names = {p.name for p in sealed.iterdir()} - {bundle.MANIFEST}
    assert not any(p.name in sealed_names for p in release.rglob("*"))


def test_the_leak_audit_catches_a_planted_needle(world, tmp_path, capsys):
    from pipeline.audit import main as audit_main

    kind, world_dir = world
    copy = tmp_path / Path(world_dir).name
    shutil.copytree(world_dir, copy)
    assert audit_main([str(copy)]) == 0, capsys.readouterr().out[-2000:]
    truth = (copy / bundle.SEALED / bundle.TRUTH).read_text()
    (copy / bundle.RELEASE / "notes.txt").write_text(truth)
    capsys.readouterr()
    assert audit_main([str(copy)]) != 0


# ----------------------------------------------------------------------------- the scorer


def _fuzz(work: Path, rng: np.random.Generator) -> None:
    work.mkdir(parents=True, exist_ok=True)
    choices = [
        lambda p: p.write_bytes(rng.bytes(int(rng.integers(0, 4000)))),
        lambda p: p.write_text(json.dumps({"nominated": ["PROT_0001", 5, None, {"x": []}], "ids": ["C000001"] * 3,
                                           "directions": [1, 2], "rejected": "all", "confidence": "NaN"})),
        lambda p: p.write_text("[" * 5000),
        lambda p: p.write_text("subject_id,phenotype\n" + "\n".join(f"SUBJ_{i:05d},{rng.normal()}" for i in range(50))),
        lambda p: os.symlink("/etc/passwd", p),
        lambda p: os.mkfifo(p),
        lambda p: p.mkdir(),
    ]
    for name in ("submission.json", "phenotype.csv", "submissions/1.json", "experiments/PROT_0001.knockdown.json",
                 "labels.csv"):
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        choices[int(rng.integers(len(choices)))](path)


@pytest.mark.parametrize("seed", range(6))
def test_the_scorer_never_raises_on_a_fuzzed_work_folder(world, tmp_path, seed):
    kind, world_dir = world
    work = tmp_path / "work"
    _fuzz(work, np.random.default_rng(seed))
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_bytes(np.random.default_rng(seed).bytes(200) + b"\n{\"status\": \"delivered\"}\n")
    result = kinds.for_world(world_dir).score_episode(str(Path(world_dir) / bundle.SEALED), str(work), str(ledger))
    json.dumps(result, allow_nan=False)
    assert 0 <= float(result["total"]) <= 100  # every kind's score has a total on 0-100


# ----------------------------------------------------------------------------- episodes


class Script(Agent):
    name = "conformance"

    def __init__(self, *replies, fail_at=None):
        self.replies, self.fail_at, self.turn = list(replies), fail_at, 0

    def act(self, observation):
        self.turn += 1
        if self.fail_at == self.turn:
            raise RuntimeError("the policy fails")
        return self.replies.pop(0) if self.replies else "no code here"


def _fence(code: str) -> str:
    return f"```python\n{code}\n```"


@pytest.mark.parametrize("path", ["finished", "turn_limit", "policy_error", "harness_error"])
def test_every_exit_path_is_scored(world, tmp_path, monkeypatch, path):
    from pipeline.harness import core

    kind, world_dir = world
    agent = {"finished": Script(_fence("print(1)"), _fence(FINISH[kind])),
             "turn_limit": Script(_fence("print(1)")),
             "policy_error": Script(_fence("print(1)"), fail_at=2),
             "harness_error": Script(_fence("print(1)"), _fence("print(2)"))}[path]
    if path == "harness_error":
        fail_on_call(monkeypatch, core, "work_listing", 2, "injected")
    out = tmp_path / "ep"
    result = run_episode(world_dir, agent, out=out, max_turns=3, timeout=120, isolation="auto", **EXTRA[kind])
    expected = {"finished": {"submitted", "finished"}, "turn_limit": {"turn_limit"}, "policy_error": {"policy_error"},
                "harness_error": {"harness_error"}}[path]
    assert result["episode"]["exit_reason"] in expected, result["episode"]
    saved = json.loads((out / "score.json").read_text())
    assert saved["episode"]["exit_reason"] == result["episode"]["exit_reason"]
    assert "total" in saved and saved["usage"]["total_tokens"] == 0
    assert json.loads((out / "transcript.json").read_text())["kind"] == kind


MARKERS = r'''
import os, json
markers = json.loads(MARKERS)
skip = set(json.loads(SYSTEM))  # the environment's own folders: the interpreter and its packages, public files
hits = []
def check(where, text):
    for m in markers:
        if m.lower() in text.lower():
            hits.append([where, m])
for name in ("mountinfo", "cgroup", "environ", "cmdline"):
    check(name, open(f"/proc/self/{name}", "rb").read().decode("utf-8", "replace"))
for top in ("/release", "/dtw/release", "/opt/dtw", "/dtw/lib", "/work", "/dtw/work", "/tmp", "/run", "/dtw"):
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in skip]
        for name in dirs + files:
            path = os.path.join(root, name)
            check("name", path)
            if name in files and not name.startswith("program") and os.path.isfile(path) and os.path.getsize(path) < 5e7:
                check(path, open(path, "rb").read().decode("utf-8", "replace"))
print("REPORT " + json.dumps(hits[:10]))
'''


@pytest.mark.skipif(not ISOLATED, reason=f"bubblewrap cannot isolate here: {REASON}")
def test_nothing_in_the_sandbox_names_the_world_or_a_chosen_folder(world, tmp_path):
    kind, world_dir = world
    world_id = Path(world_dir).name
    chosen = tmp_path / "mychosenworlds"
    shutil.copytree(world_dir, chosen / world_id)
    out = tmp_path / "mychosenepisodes" / world_id
    from pipeline.harness import bwrap

    system = json.dumps([str(p) for p in bwrap.python_dirs()])
    agent = Script(_fence(f"MARKERS = {json.dumps([world_id, 'mychosen', tmp_path.name])!r}\nSYSTEM = {system!r}\n"
                          + MARKERS),
                   _fence(FINISH[kind]))
    observations = []
    real_act = agent.act
    agent.act = lambda observation: (observations.append(observation), real_act(observation))[1]
    result = run_episode(chosen / world_id, agent, out=out, max_turns=3, timeout=120, isolation="require",
                         **EXTRA[kind])
    assert result["isolated"] is True
    report = [line for line in observations[1].text.splitlines() if line.startswith("REPORT ")]
    assert report and json.loads(report[0][len("REPORT "):]) == []
