"""A complete DrugTargetWorld agent outside the project (agent API v1).

``make(top=3, seed=0)`` returns the agent.  It imports nothing of the project but the agent
API (``pipeline.agents.base``), which the harness provides wherever the agent runs.
"""
from __future__ import annotations

from pipeline.agents.base import Agent, EpisodeInfo, Observation, fenced

BIOBANK_ANALYSIS = r'''
import numpy as np, pandas as pd
ecg = pd.read_parquet(os.path.join(RELEASE, "ecg_features.parquet"))
ct = pd.read_parquet(os.path.join(RELEASE, "coronary_ct.parquet"))
death = pd.read_parquet(os.path.join(RELEASE, "mortality.parquet"))
X = ecg.join(ct, how="inner").select_dtypes("number")
X = (X - X.mean()) / X.std(ddof=0)
X = X.fillna(0.0)
cardiac = (death.reindex(X.index)["cause"].astype(str) == "cardiac").astype(float)
coef, *_ = np.linalg.lstsq(np.c_[np.ones(len(X)), X.to_numpy()], cardiac.to_numpy(), rcond=None)
score = X.to_numpy() @ coef[1:]
pd.DataFrame({"subject_id": X.index, "phenotype": score}).to_csv(OUT_CSV, index=False)
prot = pd.read_parquet(os.path.join(RELEASE, "proteomics.parquet")).reindex(X.index)
r = prot.apply(lambda col: pd.Series(score, index=X.index).corr(col))
best = r.abs().sort_values(ascending=False).index[:TOP].tolist()
json.dump({"best": best, "r": {p: float(r[p]) for p in best}}, open(os.path.join(WORK, "example_screen.json"), "w"))
costs = {"knockdown": 400000}
budget = BUDGET
for p in best:
    if budget >= costs["knockdown"]:
        request_experiment("knockdown", p)
        budget -= costs["knockdown"]
print("screened", len(r), "proteins; strongest", best)
'''

BIOBANK_SUBMIT = r'''
screen = json.load(open(os.path.join(WORK, "example_screen.json")))
nominated, directions = [], {}
for p in screen["best"]:
    path = os.path.join(WORK, "experiments", f"{p}.knockdown.json")
    if os.path.exists(path):
        delta = json.load(open(path))["delta"]
        if abs(delta.get("cavity_r") or 0.0) > 0.2:
            nominated.append(p)
            # a knockdown that shrinks the cavity means lowering the protein helps: inhibit it
            directions[p] = "inhibit" if delta["cavity_r"] < 0 else "activate"
submit({"nominated": nominated, "directions": directions,
        "outcome_alignment": {p: "unknown" for p in nominated}, "rejected": [], "abstentions": [],
        "confidence": 0.3})
'''

SCREENING = [r'''
ids = load_library(["id"])["id"].to_numpy()
rng = np.random.default_rng(SEED)
print(request_labels(list(rng.choice(ids, status()["labels_remaining"], replace=False))), "labels requested")
''', r'''
lab = labels().sort_values(["score", "id"], ascending=[False, True])
submit(lab["id"].head(status()["submission_size"]).tolist())
finish()
''']


class ExampleAgent(Agent):
    """Two or three fixed programs per kind, parameterised by its options."""

    name = "example"

    def __init__(self, top: int = 3, seed: int = 0):
        if not isinstance(top, int) or not 1 <= top <= 25:
            raise ValueError(f"top={top!r}: invalid; valid: an integer in [1, 25]")
        self.top, self.seed = top, int(seed)

    def reset(self, info: EpisodeInfo) -> None:
        super().reset(info)
        if info.kind == "screening":
            self.plan = [f"SEED = {self.seed}\n" + SCREENING[0], SCREENING[1]]
        else:
            self.plan = [f"TOP = {self.top}\nBUDGET = {int(info.budget)}\n" + BIOBANK_ANALYSIS, BIOBANK_SUBMIT]
        self.step = 0

    def act(self, observation: Observation) -> str:
        program = self.plan[min(self.step, len(self.plan) - 1)]
        self.step += 1
        return fenced(program)


def make(top: int = 3, seed: int = 0) -> ExampleAgent:
    """The factory the harness calls (``agent=dtw_example_agent:make`` or ``agent=example``)."""
    return ExampleAgent(top=top, seed=seed)
