"""Tools: what an agent may call, as one vocabulary for every way of playing an episode.

A kind of world exposes its actions as tools (``ToolSpec``): a name, a description and
a JSON Schema of the arguments, the same objects whether a chat model sees them as
function tools (``protocol=tools``), an MCP client as MCP tools, Inspect as Inspect
tools or verifiers as environment tools.  ``run_python`` is every kind's: one sandboxed
program run, which is one turn.  A kind's other tools (``request_experiment``,
``request_labels``, ``budget``, ``submit``, ``finish``...) act exactly as the functions
of the same names do inside a program: a request is queued and charged after the turn's
program ends; ``submit`` ends the episode.

A policy (``pipeline.agents.base.Agent``) may answer an observation with text (the
``code_fence`` protocol: the last fenced block runs) or with a ``Reply`` holding tool
calls, the model's token usage and its latency; the episode core records both.

This module imports nothing but the standard library: agent packages outside the
project import it (API v1), and it is copied into the sandbox of external policies.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

#: Version of the agent-facing API (Agent, EpisodeInfo, Observation, Reply, ToolCall, ToolSpec).
API_VERSION = "1"
#: Calls that run no program (budget(), a refused call...) accepted between two program runs.
MAX_CALLS_PER_TURN = 16
#: Characters of one tool call's arguments accepted (a program's code included).
MAX_ARGUMENT_CHARS = 1_000_000


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, what it does, the JSON Schema of its arguments.

    ``runs_program`` marks ``run_python`` (a call is one turn); ``ends_episode`` marks
    ``submit``/``finish``.  ``openai()`` is the OpenAI function-tool form.
    """

    name: str
    description: str
    parameters: dict = field(default_factory=lambda: {"type": "object", "properties": {}, "additionalProperties": False})
    runs_program: bool = False
    ends_episode: bool = False

    def openai(self) -> dict:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                  "parameters": self.parameters}}


def _object(properties: dict, required: tuple = ()) -> dict:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


RUN_PYTHON = ToolSpec(
    "run_python",
    "Run one Python program in the episode's sandbox (a fresh process; RELEASE, WORK and the episode's functions "
    "are defined). This is one turn: it returns what the program printed, its errors, what the harness did with "
    "the requests it queued, the WORK listing and what is left of the budget and turns.",
    _object({"code": {"type": "string", "description": "the program's Python source"}}, ("code",)),
    runs_program=True,
)


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool by name.  ``arguments`` is a dict or the raw JSON text a model sent."""

    name: str
    arguments: Any = None
    id: Optional[str] = None

    def parsed(self) -> tuple[Optional[dict], Optional[str]]:
        """(arguments as a dict, None) or (None, why they are not acceptable)."""
        args = self.arguments
        if args is None or args == "":
            return {}, None
        if isinstance(args, str):
            if len(args) > MAX_ARGUMENT_CHARS:
                return None, f"arguments of {len(args):,} characters (at most {MAX_ARGUMENT_CHARS:,})"
            try:
                args = json.loads(args)
            except ValueError as error:
                return None, f"arguments are not valid JSON ({str(error)[:80]})"
        if not isinstance(args, dict):
            return None, f"arguments must be a JSON object, not {type(args).__name__}"
        return args, None


@dataclass(frozen=True)
class Reply:
    """A policy's answer to one observation, when it is more than text.

    ``text`` is prose (with the ``code_fence`` protocol, the program is its last fenced
    block); ``tool_calls`` are played in order; ``usage`` is the endpoint's reported
    token usage for the model call(s) behind this reply (``prompt_tokens``,
    ``completion_tokens``, ``cached_tokens``, ``total_tokens``) and ``cost_usd`` its
    price, when known; ``latency_s`` the model's time; ``events`` notes for the
    transcript (a retry, a refusal, a malformed tool call).
    """

    text: Optional[str] = None
    tool_calls: tuple = ()
    usage: Optional[dict] = None
    cost_usd: Optional[float] = None
    latency_s: Optional[float] = None
    events: tuple = ()


USAGE_KEYS = ("prompt_tokens", "completion_tokens", "cached_tokens", "total_tokens")


def add_usage(total: dict, usage: Optional[dict], cost: Optional[float] = None) -> dict:
    """Sum one model call's usage into ``total`` (missing counts are skipped, never guessed)."""
    for key in USAGE_KEYS:
        value = (usage or {}).get(key)
        if key == "cached_tokens" and value is None and isinstance((usage or {}).get("prompt_tokens_details"), dict):
            value = usage["prompt_tokens_details"].get("cached_tokens")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + int(value)
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        total["cost_usd"] = total.get("cost_usd", 0.0) + float(cost)
    return total
