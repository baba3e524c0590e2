"""The one agent interface: a policy that reads observations and replies with code.

An episode calls ``reset(info)`` once, then ``act(observation)`` once per turn.
The reply is free text; the harness runs its last fenced code block (or the
whole reply when it has no fence but contains ``print(`` or ``import``).
Observations carry the text a language model would read plus the same facts
as fields, so a scripted policy need not parse prose.

Nothing here gives a policy the sealed bundle.  A policy that must see the
truth (the ``truth`` upper bound) receives it from its factory on the harness
side and can only act on it through the code it emits.
"""
from __future__ import annotations

import abc
import json
from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class EpisodeInfo:
    """What every policy is told before the first turn."""

    episode_id: str  # a random token: the world's own id is not the agent's to know
    budget: float  # dollars for experiments (biobank), or the label budget (screening)
    max_turns: int  # turns the episode allows
    timeout: float  # seconds one program (one turn) may run
    costs: dict  # experiment kind -> dollars
    system_prompt: str  # the task instructions
    opening: str  # the first user message (also turn 1's observation text)
    paths: dict  # RELEASE, IMAGING, WORK as the program sees them
    isolated: bool  # whether the programs run isolated in the bubblewrap sandbox
    paper_compat: bool  # the episode follows the paper's rules (paper_compat=true)
    kind: str = "biobank"  # the kind of world ("biobank", "screening"): which tools and prompt
    tools: tuple = ()  # the episode's tools (pipeline.agents.tools.ToolSpec), run_python first
    tool_note: str = ""  # how the tools relate to the instructions, for a policy that calls tools


@dataclass(frozen=True)
class Observation:
    """What the policy sees before choosing its reply for ``turn``.

    ``kind`` is "opening" before turn 1, "result" after a program ran, "no_code"
    after a turn that ran no program, "tool" after tool calls that ended no turn
    (their results are in ``tool_results``) and "ended" once the episode is over.  ``code`` is the program the harness
    extracted from the previous reply (None for "opening" and "no_code"):
    a chat adapter carries it, not the reply's prose, into its history.
    """

    turn: int  # the turn the reply is for
    text: str  # what a language model would read
    kind: str  # opening, result, no_code, tool or ended (above)
    turns_remaining: int  # including this one
    budget_remaining: float  # what is left of EpisodeInfo.budget
    code: Optional[str] = None  # the program extracted from the previous reply
    status: Optional[str] = None  # "ran" | "failed" | "timeout"
    returncode: Optional[int] = None  # the program's exit status
    stdout: str = ""  # what the program printed
    stderr: str = ""  # and its errors
    delivered: tuple = ()  # ({"kind", "protein", "cost", "path"}, ...) charged after the previous program
    refused: tuple = ()  # ({"kind", "protein", "reason"}, ...)
    work_listing: tuple = ()  # paths relative to WORK
    submission_status: Optional[str] = None  # the biobank kind's: how WORK/submission.json read (e.g. parsed)
    tool_results: tuple = ()  # ({"id", "name", "text"}, ...): the results of the tool calls of the previous reply


class Agent(abc.ABC):
    """Base class of every policy.  Subclasses implement ``act``."""

    name = "agent"

    def reset(self, info: EpisodeInfo) -> None:
        self.info = info

    @abc.abstractmethod
    def act(self, observation: Observation) -> str:
        """The reply for ``observation.turn``: free text holding the program to run."""


class ScriptedAgent(Agent):
    """A policy whose turns are fixed programs, played in order, on any kind of world.

    ``programs(info)`` returns the list of programs.  A program that failed
    or timed out is retried once (a transient failure should not cost the
    analysis); if the retry fails too the script gives up and plays the kind's
    fallback (``FALLBACKS[info.kind]``, or ``FALLBACK`` when a subclass sets
    one): on a biobank world it submits whatever WORK holds, on a screening
    world it finishes (the best accepted submission counts), so a script always
    ends rather than burning the remaining turns.  A program that runs gives
    the next one its own retry.
    """

    FALLBACK: Optional[str] = None
    FALLBACKS = {"biobank": """\
path = os.path.join(WORK, "submission.json")
try:
    with open(path) as handle:
        claims = json.load(handle)
    assert isinstance(claims, dict)
except Exception:
    claims = {"nominated": [], "directions": {}, "outcome_alignment": {}, "rejected": [], "abstentions": [],
              "confidence": 0.0}
submit(claims)
""", "screening": "finish()\n"}

    @abc.abstractmethod
    def programs(self, info: EpisodeInfo) -> list[str]:
        """The programs to play, in turn order."""

    def reset(self, info: EpisodeInfo) -> None:
        super().reset(info)
        self._programs = self.programs(info)
        self._step = 0
        self._retried = False

    def fallback(self) -> str:
        kind = getattr(getattr(self, "info", None), "kind", "biobank")
        return self.FALLBACK if self.FALLBACK is not None else self.FALLBACKS.get(kind, self.FALLBACKS["biobank"])

    def act(self, observation: Observation) -> str:
        if observation.kind == "result" and observation.status == "ran":
            self._retried = False
        if observation.kind == "result" and observation.status != "ran" and self._step > 0:
            if self._retried:
                return fenced(self.fallback())
            self._retried = True
            self._step -= 1
        program = self._programs[min(self._step, len(self._programs) - 1)]
        self._step += 1
        return fenced(program)


def fenced(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def literal(value) -> str:
    """A Python expression for JSON-like data, for embedding in emitted code.

    Goes through JSON so that true/false/null and odd strings cannot turn into
    invalid or different Python.
    """
    return f"json.loads({json.dumps(value, sort_keys=True)!r})"


@dataclass
class AgentSpec:
    """A registry entry: how to build an agent by name."""

    name: str
    factory: object  # callable(**options) -> Agent
    privileged: bool = False  # receives the sealed folder as ``sealed_dir``
    reference: bool = False  # the project's own code: may run with isolation="auto"
    description: str = ""
    options: dict = field(default_factory=dict)  # option name -> help text
