"""The null agent: claims nothing, builds no phenotype, and submits at once.

Its score is the floor a policy must beat, and in the null world it is the
restraint credit of S2.3 (15 points).
"""
from __future__ import annotations

from .base import EpisodeInfo, ScriptedAgent

PROGRAM = """\
empty = {"nominated": [], "directions": {}, "outcome_alignment": {}, "rejected": [], "abstentions": [], "confidence": 0.0}
with open(os.path.join(WORK, "submission.json"), "w") as handle:
    json.dump(empty, handle)
submit()
"""


class NullAgent(ScriptedAgent):
    name = "null"

    def programs(self, info: EpisodeInfo) -> list[str]:
        return [PROGRAM]
