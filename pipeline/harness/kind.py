"""What a kind of world supplies to the episode core: its tools, its prompt, its oracle and
its scorer — nothing else.

The core (``pipeline.harness.core``) owns everything the kinds share: the episode folder
and the neutral staging, the sandbox and its isolation, the turn loop and its exit rules,
tool calls, the transcript, the usage sums, and score.json on every exit path.  A kind
implements :class:`KindEpisode` for one episode on one of its worlds:

``configure`` / ``open``
    check the kind's own options (the biobank kind's ``budget`` and ``paper_compat``, the
    screening kind's ``mode`` and clock) before anything is made, then open the oracle
    and its ledger.
``runtime`` / ``tools`` / ``prompts`` / ``format_hint``
    the sandbox prelude (the functions a program may call), the same actions as tools,
    the task instructions and the hint after a reply without code.
``start`` / ``after_turn``
    WORK's initial state; after each turn's program (and the tool calls queued with it)
    the oracle's answers: what it charged and gave, what it wrote into WORK (through the
    session's safe writer), the observation's sections and status line, and whether the
    episode ends.
``call``
    a tool call that runs no program: answered now (``budget``), queued for the turn's end
    (a request), or ending the episode (``submit``, ``finish``).
``score`` / ``crash_score`` / ``summary``
    the kind's scorer on what WORK holds, the zero score of a crashed runner, and the
    kind's figures for the episode summary.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..agents.tools import ToolCall, ToolSpec


class EpisodeError(ValueError):
    """The episode cannot start (bad world folder, bad arguments, unsafe output folder)."""


@dataclass
class TurnOutcome:
    """A kind's answer to one turn."""

    sections: list = field(default_factory=list)  # [(title, [lines])] shown between stderr and the WORK listing
    status: str = ""  # the status section's text (budget, turns, submission state)
    fields: dict = field(default_factory=dict)  # extra Observation fields (delivered, refused, submission_status)
    record: dict = field(default_factory=dict)  # what the transcript keeps of the kind's side of the turn
    ends: Optional[str] = None  # the exit reason when this turn ends the episode
    report: str = ""  # a short progress phrase ("2 experiment(s) delivered; spent $800,000")


@dataclass
class CallOutcome:
    """A kind's answer to a tool call that runs no program."""

    text: str
    queued: Optional[dict] = None  # an action for the turn's end (the kind's own record)
    ends: Optional[str] = None  # the exit reason when the call ends the episode
    refused: bool = False


class KindEpisode(abc.ABC):
    """The kind-specific half of one episode (see the module docstring)."""

    #: the kind's name (``pipeline.kinds``)
    kind: str = ""
    #: the default turn limit and per-turn seconds
    default_turns: int = 30
    default_timeout: float = 300.0
    #: the options this kind accepts beyond the core's, with their help text
    options: dict = {}

    def __init__(self, world: Path, release: Path, sealed: Path, world_id: str):
        self.world, self.release, self.sealed, self.world_id = world, release, sealed, world_id

    # -- set up

    @abc.abstractmethod
    def configure(self, options: dict) -> None:
        """Check the kind's options (``budget`` among them, None when not given) and keep them;
        raise ``EpisodeError`` naming the option and what is valid.  Makes nothing."""

    @abc.abstractmethod
    def open(self, ledger_path: Path) -> None:
        """Open the kind's oracle with its ledger at ``ledger_path``."""

    def label(self) -> str:
        """A short word for the episode's default folder name (the budget, the mode)."""
        return self.kind

    def runtime(self) -> Optional[str]:
        """The sandbox prelude's text (None: the biobank prelude)."""
        return None

    @abc.abstractmethod
    def tools(self) -> list[ToolSpec]:
        """The kind's tools besides run_python, in the order a prompt lists them."""

    @abc.abstractmethod
    def prompts(self, session) -> tuple[str, str]:
        """(system prompt, opening message)."""

    @abc.abstractmethod
    def format_hint(self) -> str:
        """What a reply without code is told."""

    def info(self) -> dict:
        """EpisodeInfo fields: ``budget`` (the budget's size in its own unit) and ``costs``."""
        return {"budget": 0.0, "costs": {}}

    def start(self, session) -> None:
        """WORK's initial state, written through ``session.write``."""

    def header(self) -> dict:
        """The kind's part of the transcript header."""
        return {}

    # -- turns

    @abc.abstractmethod
    def after_turn(self, session, turn: int, run: Any, queued: list) -> TurnOutcome:
        """The oracle's answers after turn ``turn``: ``run`` is the program's RunResult (None
        when the turn ran no program: the final actions of a ``submit`` call), ``queued`` the
        actions tool calls queued since the previous turn, in call order."""

    @abc.abstractmethod
    def call(self, session, call: ToolCall, args: dict) -> CallOutcome:
        """A tool call that runs no program (the arguments already parsed)."""

    @abc.abstractmethod
    def status(self, session, turns_left: int) -> str:
        """The status line of an observation that ran no program."""

    @abc.abstractmethod
    def remaining(self) -> float:
        """What is left of the budget, in its own unit (the Observation's budget_remaining)."""

    # -- the end

    @abc.abstractmethod
    def score(self, session) -> tuple[dict, Optional[str]]:
        """(the score of what WORK holds, where it was scored from)."""

    @abc.abstractmethod
    def crash_score(self, reason: str) -> dict:
        """The score of an episode whose runner crashed: zero on every component."""

    def summary(self) -> dict:
        """The kind's figures for the episode summary (spend, labels used...)."""
        return {}
