"""The four reference strategies of a screening world, as scripted agents.

Their programs run inside the sandbox with nothing but the release and the
label oracle (the prelude's functions).  Specifications, fixed before the
difficulty calibration (docs/screening.md, "Reference strategies"):

* ``random``: one submission of S ids drawn uniformly without replacement.
* ``labels_only``: spend the whole budget B at random in one batch; submit the
  S best labelled conformations.
* ``invariant_al`` / ``pose_al``: ten rounds of active learning and three
  strategic submissions (``strategy_code.py``) on rotation- and
  translation-invariant features (Morgan bits) or on features that are not
  (Morgan bits plus atom-type occupancy of a grid in the pocket frame).
"""
from __future__ import annotations

from pathlib import Path

from ..agents.base import AgentSpec, EpisodeInfo, ScriptedAgent

STRATEGY_SOURCE = (Path(__file__).resolve().parent / "strategy_code.py").read_text()


class _Screening(ScriptedAgent):
    """A program that fails twice ends the episode (ScriptedAgent's screening fallback, finish());
    the best accepted submission still counts."""


class RandomAgent(_Screening):
    def programs(self, info: EpisodeInfo) -> list[str]:
        return ["""\
ids = load_library(["id"])["id"].to_numpy()
st = status()
rng = np.random.default_rng(0)
print(submit(list(rng.choice(ids, st["submission_size"], replace=False))), "ids submitted")
finish()
"""]


class LabelsOnlyAgent(_Screening):
    def programs(self, info: EpisodeInfo) -> list[str]:
        return ["""\
ids = load_library(["id"])["id"].to_numpy()
st = status()
rng = np.random.default_rng(0)
print(request_labels(list(rng.choice(ids, st["labels_remaining"], replace=False))), "labels requested")
""", """\
lab = labels().sort_values(["score", "id"], ascending=[False, True])
print(len(lab), "labels; best", lab["score"].head(3).tolist())
submit(lab["id"].head(status()["submission_size"]).tolist())
finish()
"""]


class _ActiveLearning(_Screening):
    kind = "invariant"

    def __init__(self, rounds: int = 10, trees: int = 400):
        """``rounds`` and ``trees`` are the specification's (10, 400); fewer only in a quick check
        of the loop (the tests' tiny episodes), never in a calibration."""
        super().__init__()
        if not (1 <= int(rounds) <= 100 and 1 <= int(trees) <= 10_000):
            raise ValueError(f"rounds={rounds}, trees={trees}: invalid; valid: rounds in [1, 100], trees in [1, 10000]")
        self.rounds, self.trees = int(rounds), int(trees)

    def programs(self, info: EpisodeInfo) -> list[str]:
        head = "import screening_al as al\n"
        opts = f"rounds={self.rounds}, trees={self.trees}"
        round_code = [head + f"print('round {k}:', al.al_round(WORK, {self.kind!r}, {k}, status(), labels(), request_labels, "
                             f"{opts}), 'requested')\n" for k in range(1, self.rounds + 1)]
        round_code[0] = (f"open(os.path.join(WORK, 'screening_al.py'), 'w').write({STRATEGY_SOURCE!r})\n" + head +
                         f"al.featurize(RELEASE, WORK, {self.kind!r})\n" + round_code[0][len(head):])
        subs = [head + f"ids = al.submission(WORK, {self.kind!r}, {k}, status(), labels(), submission_results(), "
                       f"trees={self.trees})\n"
                       f"print('submission {k}:', submit(ids), 'ids; results so far', submission_results())\n"
                for k in (1, 2, 3)]
        return [*round_code, *subs]


class InvariantALAgent(_ActiveLearning):
    kind = "invariant"


class PoseALAgent(_ActiveLearning):
    kind = "pose"


_AL_OPTIONS = {"rounds": "active-learning rounds (the specification: 10)",
               "trees": "LightGBM trees per model (the specification: 400)"}
REGISTRY = {spec.name: spec for spec in (
    AgentSpec("random", RandomAgent, reference=True, description="one submission of random ids"),
    AgentSpec("labels_only", LabelsOnlyAgent, reference=True,
              description="the whole budget at random; submit the best labelled"),
    AgentSpec("invariant_al", InvariantALAgent, reference=True, options=_AL_OPTIONS,
              description="Morgan bits, LightGBM, ten AL rounds, three strategic submissions"),
    AgentSpec("pose_al", PoseALAgent, reference=True, options=_AL_OPTIONS,
              description="Morgan bits + pocket-frame grid occupancy, same loop"),
)}
STRATEGIES = tuple(REGISTRY)


def is_reference_agent(agent) -> bool:
    """True only for an instance of one of these reference strategies' classes (not a subclass):
    the project's own code, which may run with isolation="auto"."""
    return any(type(agent) is spec.factory for spec in REGISTRY.values() if spec.reference)


def create_agent(name: str, **options):
    """Build the screening agent ``name`` (the registry of every kind does the work)."""
    from ..agents.registry import create

    return create("screening", name, options).agent
