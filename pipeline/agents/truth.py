"""The truth agent: the score's upper bound for a world and budget.

Its policy is handed the sealed bundle on the harness side (``sealed_dir``);
inside the sandbox only the code it emits runs, with the answers written into
that code.  It plays the claims the scorer rewards most:

* every decoy rejected with its mechanism; the surrogate never nominated;
* drivers outside an ambiguous (T4 or A9) pair nominated with their true
  direction and "aligned";
* for each pair, an experiment on the causal member when the budget allows
  (the cheapest kind; which kind does not matter to the scorer), then, once the
  result is delivered, the causal member nominated (25 points for the pair);
  a pair it cannot afford to test is abstained on (17.5 points) - at $0 all;
* a phenotype equal to the latent severity (embedded compressed in the code).
"""
from __future__ import annotations

import base64
import math
import zlib

import numpy as np

from .. import bundle
from .base import EpisodeInfo, ScriptedAgent, literal

MECHANISMS = {"T1": "confounding", "T2": "reverse_causation", "T3": "selection", "T7": "pleiotropy",
              "T9": "measurement_artifact"}


def _packed(data: bytes) -> str:
    return base64.b64encode(zlib.compress(data, 9)).decode("ascii")


class TruthAgent(ScriptedAgent):
    name = "truth"

    def __init__(self, sealed_dir):
        self.truth = bundle.read_sealed(sealed_dir, bundle.TRUTH)
        latent = bundle.read_sealed(sealed_dir, bundle.LATENT)
        if "subject_id" in latent.columns:
            latent = latent.set_index("subject_id")
        self.latent = latent["latent"].astype("float64")

    def _phenotype_code(self) -> str:
        ids = _packed("\n".join(map(str, self.latent.index)).encode("utf-8"))
        values = _packed(np.ascontiguousarray(self.latent.to_numpy(), dtype="<f8").tobytes())
        return (
            "import base64, zlib\n"
            f"_ids = zlib.decompress(base64.b64decode({ids!r})).decode('utf-8').split('\\n')\n"
            f"_values = np.frombuffer(zlib.decompress(base64.b64decode({values!r})), dtype='<f8')\n"
            "pd.DataFrame({'subject_id': _ids, 'phenotype': _values}).to_csv(OUT_CSV, index=False)\n"
        )

    def plan(self, info: EpisodeInfo) -> tuple[list[tuple[str, str]], dict]:
        """(experiments to buy, final claims) for this budget."""
        truth = self.truth
        drivers = {d["protein"]: d["direction"] for d in truth.get("drivers", [])}
        pairs = [p for p in truth.get("pairs", []) if p.get("causal") in drivers]
        kind = min(info.costs, key=lambda k: (info.costs[k], k))
        affordable = int(math.floor(info.budget / info.costs[kind] + 1e-9)) if info.costs[kind] > 0 else len(pairs)
        tested = pairs[:affordable]
        untested = pairs[affordable:]
        paired = {p["causal"] for p in pairs}
        nominated = [d for d in drivers if d not in paired] + [p["causal"] for p in tested]
        claims = {
            "nominated": nominated,
            "directions": {p: drivers[p] for p in nominated},
            "outcome_alignment": {p: "aligned" for p in nominated},
            "rejected": [{"molecule": d["protein"], "mechanism": MECHANISMS.get(d.get("bias"), d.get("mechanism")),
                          "reason": f"planted {d.get('bias')}"} for d in truth.get("decoys", [])],
            "abstentions": [{"molecules": [p["causal"], p["partner"]], "reason": f"planted {p.get('kind')} pair"}
                            for p in untested],
            "confidence": 1.0,
        }
        return [(kind, p["causal"]) for p in tested], claims

    def programs(self, info: EpisodeInfo) -> list[str]:
        experiments, claims = self.plan(info)
        write = (f"with open(os.path.join(WORK, 'submission.json'), 'w') as handle:\n"
                 f"    json.dump({literal(claims)}, handle, indent=1)\n")
        if not experiments:
            return [self._phenotype_code() + write + "submit()\n"]
        request = "".join(f"request_experiment({kind!r}, {protein!r})\n" for kind, protein in experiments)
        wait = "".join(
            f"assert os.path.exists(os.path.join(WORK, 'experiments', {f'{p}.{k}.json'!r})), 'result missing'\n"
            for k, p in experiments
        )
        return [self._phenotype_code() + request, wait + write + "submit()\n"]
