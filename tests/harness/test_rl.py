"""The verifiers environment ``pipeline.rl.load_environment`` on tiny training worlds, offline.

A stub OpenAI-compatible endpoint (tests/stub_openai.py) behind verifiers' own OpenAI client
plays one rollout per kind: the reward equals the project's scorer on the same WORK and
ledger, every component is a metric.  Training seeds never equal an evaluation seed (the
development panel's, a sealed seeds file's); a group of rollouts shares one world, built once
and reused; bad input is a one-line error naming the parameter before any episode; wrong tool
calls are tool messages, never a crashed rollout; every episode runs isolated.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

vf = pytest.importorskip("verifiers")

from openai import AsyncOpenAI  # noqa: E402

from pipeline import bundle, config  # noqa: E402
from pipeline.agents.truth import TruthAgent  # noqa: E402
from pipeline.frameworks import worlds as W  # noqa: E402
from pipeline.harness import isolation_status  # noqa: E402
from pipeline.oracle import load_oracle  # noqa: E402
from pipeline.rl import (ParameterError, evaluation_seeds, families, load_environment, reward_of,  # noqa: E402
                         training_seed)
from pipeline.score import score_episode  # noqa: E402
from pipeline.screening.score import score_episode as screening_score  # noqa: E402

from stub_openai import StubChatServer  # noqa: E402

ISOLATED = isolation_status()
needs_isolation = pytest.mark.skipif(not ISOLATED[0], reason=f"no isolation here: {ISOLATED[1]}")
PARTS = ("target_identification", "causal_confidence", "bias_identification", "intervention_direction",
         "phenotype_construction", "safety_penalty", "total")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("rl_worlds")


def completion(calls=(), content=None) -> dict:
    """A complete OpenAI chat completion body (``calls``: (name, arguments dict or raw text))."""
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{"id": f"call-{i}-{name}", "type": "function",
                                  "function": {"name": name, "arguments": args if isinstance(args, str)
                                               else json.dumps(args)}} for i, (name, args) in enumerate(calls)]
    return {"raw": json.dumps({"id": "stub", "object": "chat.completion", "created": 0, "model": "stub",
                               "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop",
                                            "message": message}],
                               "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}})}


def scripted(steps: list):
    """A reply for each step of a conversation, by the number of assistant turns so far (so
    concurrent rollouts of a group each get the whole script)."""
    def reply(body: dict) -> dict:
        done = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        return steps[min(done, len(steps) - 1)]
    return reply


def play(env, steps: list, rollouts: int = 1) -> list:
    with StubChatServer([], default=scripted(steps)) as server:
        client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=server.base_url, api_key="stub"))
        out = env.evaluate_sync(client=client, model="stub", num_examples=1, rollouts_per_example=rollouts,
                                state_columns=["dtw_score"])
    outputs = out["outputs"]
    assert len(outputs) == rollouts
    return outputs


def rescored(result: dict) -> dict:
    episode = result["episode"]
    folder = Path(episode["episode_dir"])
    world = Path(json.loads((folder / "transcript.json").read_text())["world_dir"])
    if episode["kind"] == "screening":
        return screening_score(world / bundle.SEALED, folder / "work", str(folder / "ledger.jsonl"))
    return score_episode(world / bundle.SEALED, folder / "work", folder / "ledger.jsonl")


# ----------------------------------------------------------------------------- seeds


def test_training_seeds_never_equal_an_evaluation_seed():
    panel = config.validate_panel(config.compose(["panel=paper-v1"], config_name="panel_config"))
    development = {w: config.load([f"world={w}", "scale=tiny", "cluster=sync"]).seed for w in panel
                   if not w.startswith("heldout-")}
    assert len(development) == 12
    taken = evaluation_seeds()
    assert set(development.values()) <= set(taken), "every development world of the panel is checked"
    seeds = {training_seed("train", i) for i in range(20_000)}
    assert len(seeds) == 20_000 and not seeds & set(taken)
    assert all(s.bit_length() == 128 for s in list(seeds)[:100])
    assert training_seed("train", 3) == training_seed("train", 3) != training_seed("train2", 3)
    assert training_seed("train", 3) != training_seed("train", 3, key="a private key")
    specs = W.training_specs("biobank", "standard", "tiny", 50, "train")
    assert not {s.seed for s in specs} & set(development.values())
    assert all("seed" not in s.row() for s in specs)


def test_a_colliding_seed_is_refused(tmp_path):
    """A seeds file (held-out worlds) holding a seed the namespace derives: refused at load."""
    seeds = tmp_path / "seeds.yaml"
    seeds.write_text(f"heldout-dcm-01: '{hex(training_seed('train', 5))}'\n")
    with pytest.raises(ParameterError) as info:
        load_environment(n_worlds=8, seeds=str(seeds), cache_dir=str(tmp_path / "cache"))
    text = str(info.value)
    assert text.startswith("seed_namespace='train': world 5 derives the seed of an evaluation world") and \
        "heldout-dcm-01" in text and "\n" not in text
    # worlds 0-4 and 6-13 are fine (isolation=auto: no episode runs here)
    load_environment(n_worlds=5, seeds=str(seeds), cache_dir=str(tmp_path / "cache"), isolation="auto")
    load_environment(n_worlds=8, start_index=6, seeds=str(seeds), cache_dir=str(tmp_path / "cache"), isolation="auto")
    assert not (tmp_path / "cache").exists()  # rows at load, no world built


def test_bad_input_is_one_line_naming_the_parameter(tmp_path):
    cases = [
        (dict(colour="red"), "colour: not a parameter of load_environment"),
        (dict(kind="chess"), "kind='chess': invalid; valid: biobank, screening"),
        (dict(scale="paper"), "scale='paper': invalid; valid: tiny, small"),
        (dict(budgets=[450000, 7]), "budgets=7: invalid; valid: one of 0, 450000, 2000000"),
        (dict(n_worlds=0), "n_worlds=0: invalid"),
        (dict(seed_namespace="no spaces"), "seed_namespace='no spaces': invalid"),
        (dict(preset="labels-10"), "preset='labels-10': not a biobank world family"),
        (dict(kind="screening", budgets=[0]), "budgets: not an option of a screening world"),
        (dict(weights={"style": 1.0}), "weights: unknown part 'style'"),
        (dict(seeds=str(tmp_path / "missing.yaml")), "seeds="),
        (dict(isolation="sometimes"), "isolation='sometimes': invalid"),
        (dict(kind="screening", release="noimaging"), "release='noimaging': not an option of a screening world"),
    ]
    for kwargs, expected in cases:
        with pytest.raises(ParameterError) as info:
            load_environment(cache_dir=str(tmp_path / "cache"), **kwargs)
        assert expected in str(info.value) and "\n" not in str(info.value), (kwargs, str(info.value))


def test_verifiers_finds_the_environment_by_its_id(tmp_path):
    """``verifiers.load_environment("drugtargetworld", ...)``, as a trainer's env id loads it:
    the rows exist at load, no world is built."""
    env = vf.load_environment("drugtargetworld", kind="screening", n_worlds=3, preset=["labels-20", "labels-05"],
                              cache_dir=str(tmp_path / "cache"), isolation="auto")
    rows = env.get_dataset().to_list()
    assert [r["info"]["family"] for r in rows] == ["labels-20", "labels-05", "labels-20"]
    assert [r["info"]["index"] for r in rows] == [0, 1, 2]
    assert {t.name for t in env.tool_defs} == {"run_python", "request_labels", "submit", "budget", "finish"}
    assert not (tmp_path / "cache").exists()


def test_a_world_that_fails_to_build_is_one_line_naming_it(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    (spec,) = W.training_specs("biobank", "intro", "tiny", 1, "train")
    with pytest.raises(W.WorldBuildError) as info:
        W.ensure_training_world(spec, blocker / "cache")
    text = str(info.value)
    assert text.startswith("seed_namespace='train' world 0 (drugtargetworld/biobank/intro@tiny") and "\n" not in text


def test_families_are_the_generators_validated_settings():
    names = {f.name for f in families("biobank")}
    assert {"intro", "standard", "hard", "hard-messy", "all-biases", "null"} <= names
    assert [f.name for f in families("screening")] == ["labels-20", "labels-10", "labels-05"]
    for fam in families():
        arch = fam.archetypes[-1] if fam.archetypes else None
        spec = W.WorldSpec(fam.kind, fam.name, "tiny", "default", "train", 3, training_seed("train", 3), arch)
        resolved = W.resolve(spec.overrides("/tmp/unused"))
        assert resolved.seed == spec.seed and str(resolved.cfg.world.id) == spec.world_id
        if arch is not None:
            assert str(resolved.cfg.world.archetype) == arch
    specs = W.training_specs("biobank", "hard", "tiny", 8, "train")
    assert [s.archetype for s in specs] == ["dcm", "hcm", "hfpef", "ischemic"] * 2
    hard = W.resolve(specs[0].overrides("/tmp/unused")).cfg.world
    assert hard.hard and not hard.messy and int(hard.n_drivers) == 4 and "T9" in list(hard.biases)
    assert W.family_id("biobank", "hard", "small", "noimaging") == "drugtargetworld/biobank/hard@small+noimaging"


def test_reward_weights():
    result = {"target_identification": 30.0, "causal_confidence": 10.0, "bias_identification": 5.0,
              "intervention_direction": 20.0, "phenotype_construction": 4.0, "safety_penalty": -30.0, "total": 39.0}
    assert reward_of(result, None) == pytest.approx(0.39)
    assert reward_of(result, {"target_identification": 1.0, "safety_penalty": 2.0}) == pytest.approx(-0.3)


# ----------------------------------------------------------------------------- rollouts


@needs_isolation
def test_biobank_rollout_reward_is_the_projects_score(cache, tmp_path, monkeypatch):
    import pipeline.build

    builds = []
    real = pipeline.build.build
    monkeypatch.setattr(pipeline.build, "build", lambda resolved, **kw: builds.append(1) or real(resolved, **kw))
    env = load_environment(kind="biobank", n_worlds=1, budgets=[2_000_000], preset="standard",
                           cache_dir=str(cache), episodes_dir=str(tmp_path / "episodes"), keep_episodes=True)
    (row,) = env.get_dataset().to_list()
    assert row["info"]["family_id"] == "drugtargetworld/biobank/standard@tiny+noimaging"
    assert row["info"]["budget"] == 2_000_000 and "seed" not in json.dumps(row)
    world = env.world_dir(env.specs[0])  # built here, so that the script can hold the known answer
    assert builds == [1]
    sealed = world / bundle.SEALED
    truth = TruthAgent(sealed)
    experiments, claims = truth.plan(SimpleNamespace(budget=2_000_000.0, costs=dict(load_oracle(sealed).costs)))
    steps = [
        completion([("run_python", {"code": truth._phenotype_code() + "print('phenotype written')"})]),
        completion([("request_experiment", {"kind": k, "protein": p}) for k, p in experiments]
                   + [("budget", {}), ("run_python", "{not json"), ("no_such_tool", {})]),
        completion(content="Thinking aloud without a tool call."),
        completion([("run_python", {"code": "print(sorted(os.listdir(os.path.join(WORK, 'experiments'))))"})]),
        completion([("submit", {"submission": claims})]),
    ]
    (out,) = play(env, steps)
    result = out["dtw_score"]
    expected = rescored(result)
    assert out["error"] is None and out["is_completed"]
    assert result["episode"]["exit_reason"] == "submitted" and result["isolated"] is True
    assert out["reward"] == pytest.approx(expected["total"] / 100) and expected["total"] > 80
    for part in PARTS:
        assert out["metrics"][part] == pytest.approx(expected[part]), part
    assert out["metrics"]["ended_by_rule"] == 1.0
    assert builds == [1]  # the rollout reused the world
    tool_texts = [m["content"] for m in out["completion"] if m["role"] == "tool"]
    assert any(t.startswith("Refused: arguments are not valid JSON") for t in tool_texts)
    assert any(t.startswith("Refused: unknown tool") for t in tool_texts)
    assert any("phenotype written" in t for t in tool_texts)
    assert result["usage"]["prompt_tokens"] == 7 * len(steps)


@needs_isolation
def test_screening_rollout_reward_is_the_projects_score(cache, tmp_path):
    env = load_environment(kind="screening", n_worlds=1, preset="labels-05", cache_dir=str(cache),
                           episodes_dir=str(tmp_path / "episodes"), keep_episodes=True, turns=6)
    world = env.world_dir(env.specs[0])
    top = json.loads((world / bundle.SEALED / "topk.json").read_text())["ids"]
    steps = [
        completion([("request_labels", {"ids": top[:10]}), ("request_labels", {"ids": "C000001"})]),
        completion([("run_python", {"code": "print('first program')"})]),
        completion([("submit", {"ids": top[: len(top) // 2]})]),
        completion([("run_python", {"code": "print(open(os.path.join(WORK, 'labels.csv')).read().count(chr(10)))"})]),
        completion([("finish", {})]),
    ]
    (out,) = play(env, steps)
    result = out["dtw_score"]
    expected = rescored(result)
    assert result["episode"]["exit_reason"] == "finished" and result["isolated"] is True
    assert expected["total"] == pytest.approx(100.0 * (len(top) // 2) / len(top))
    assert out["reward"] == pytest.approx(expected["total"] / 100)
    assert out["metrics"]["score"] == pytest.approx(expected["score"])
    tool_texts = [m["content"] for m in out["completion"] if m["role"] == "tool"]
    assert any(t.startswith("Refused: ids must be a non-empty list") for t in tool_texts)
    assert any("labels: 10 delivered" in t for t in tool_texts)


@needs_isolation
def test_a_group_of_rollouts_shares_one_world(cache, tmp_path, monkeypatch):
    import pipeline.build

    builds = []
    real = pipeline.build.build
    monkeypatch.setattr(pipeline.build, "build", lambda resolved, **kw: builds.append(1) or real(resolved, **kw))
    options = dict(kind="biobank", n_worlds=1, start_index=1, budgets=[0], preset="intro", cache_dir=str(cache),
                   episodes_dir=str(tmp_path / "episodes"), keep_episodes=True, turns=2)
    env = load_environment(**options)
    steps = [completion([("run_python", {"code": "print('hello')"})]), completion(content="no tool")]
    outs = play(env, steps, rollouts=2)
    assert builds == [1]
    worlds = {json.loads(Path(o["dtw_score"]["episode"]["transcript"]).read_text())["world_dir"] for o in outs}
    assert len(worlds) == 1
    assert {o["dtw_score"]["episode"]["exit_reason"] for o in outs} == {"turn_limit"}
    assert len({o["dtw_score"]["episode"]["episode_dir"] for o in outs}) == 2
    for o in outs:
        assert o["reward"] == pytest.approx(rescored(o["dtw_score"])["total"] / 100)
    # a later environment over the same cache reuses the world; episodes are removed unless kept
    env = load_environment(**{**options, "keep_episodes": False, "episodes_dir": str(tmp_path / "gone")})
    (out,) = play(env, steps)
    assert builds == [1]
    assert not Path(out["dtw_score"]["episode"]["episode_dir"]).exists()


@needs_isolation
def test_a_harness_failure_ends_the_rollout_scored(cache, tmp_path, monkeypatch):
    from pipeline.harness.core import Session

    real = Session.respond
    seen = []

    def failing(self, reply, **kw):
        seen.append(reply)
        if len(seen) == 2:
            raise RuntimeError("a harness bug")
        return real(self, reply, **kw)

    monkeypatch.setattr(Session, "respond", failing)
    env = load_environment(kind="screening", n_worlds=1, preset="labels-05", cache_dir=str(cache),
                           episodes_dir=str(tmp_path / "episodes"), keep_episodes=True)
    steps = [completion([("run_python", {"code": "print(1)"})]), completion([("budget", {})]),
             completion([("finish", {})])]
    (out,) = play(env, steps)
    result = out["dtw_score"]
    assert out["error"] is None and result["episode"]["exit_reason"] == "harness_error"
    assert "a harness bug" in result["episode"]["exit_detail"]
    assert out["reward"] == pytest.approx(rescored(result)["total"] / 100)
    assert out["completion"][-1]["content"].endswith("the episode has ended (harness_error).")
