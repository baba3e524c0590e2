"""Agents (policies) by name, for the harness and ``python -m pipeline.episode agent=<name>``.

    from pipeline.agents import create_agent
    agent = create_agent("cis_mr")
    agent = create_agent("truth", sealed_dir=world / "sealed")
    agent = create_agent("openai_chat", base_url="http://127.0.0.1:8000/v1", model="m")

A privileged agent (``truth``) needs ``sealed_dir``; the harness passes it on
its own side of the sandbox.  Other agents never receive it.
"""
from __future__ import annotations

import inspect

from .analyst import AnalystAgent
from .base import Agent, AgentSpec, EpisodeInfo, Observation, ScriptedAgent
from .cis_mr import CisMRAgent
from .correlation import CorrelationAgent
from .mr_knockdown import MRKnockdownAgent
from .null import NullAgent
from .openai_chat import OpenAIChatAgent, TransportError
from .tells import TellsAgent
from .truth import TruthAgent

REGISTRY = {
    spec.name: spec for spec in (
        AgentSpec("null", NullAgent, reference=True, description="claims nothing and submits at once"),
        AgentSpec("truth", TruthAgent, reference=True, privileged=True,
                  description="upper bound: plays the sealed truth (handed over harness-side)"),
        AgentSpec("correlation", CorrelationAgent, reference=True, description="non-omics phenotype, marginal protein screen"),
        AgentSpec("cis_mr", CisMRAgent, reference=True, description="lead-variant Wald-ratio MR with an instrument-strength filter"),
        AgentSpec("mr_knockdown", MRKnockdownAgent, reference=True, description="cis-MR, then experiments on what MR cannot settle"),
        AgentSpec("analyst", AnalystAgent, reference=True,
                  description="own MRI segmentation and multi-modality phenotype, MR with sensitivity checks, "
                              "decoy mechanisms, experiments on what observation cannot settle"),
        AgentSpec("tells", TellsAgent, reference=True,
                  description="exploit: roles read off role-blind statistics only (benchmark validity)"),
        AgentSpec("openai_chat", OpenAIChatAgent, description="an OpenAI-compatible /chat/completions endpoint",
                  options={name: "" for name in inspect.signature(OpenAIChatAgent.__init__).parameters
                           if name != "self"}),
    )
}
# The scored reference set of the benchmark (tells is the project's own too, but an exploit probe).
REFERENCE_AGENTS = ("null", "truth", "correlation", "cis_mr", "mr_knockdown")


def is_project_agent(agent: Agent) -> bool:
    """True only for an instance of one of the project's reference agent classes, of any kind (not a subclass)."""
    from .registry import is_project_agent as check

    return check(agent)


def create_agent(name: str, *, sealed_dir=None, **options) -> Agent:
    """Build the agent ``name`` for a biobank world; ``sealed_dir`` only reaches privileged agents.

    The registry of every kind (``pipeline.agents.registry.create``) does the work: a
    reference agent, ``openai_chat``, ``<module>:<factory>`` or an entry point.
    """
    from .registry import create

    return create("biobank", name, options, sealed_dir=sealed_dir).agent


__all__ = [
    "Agent", "AgentSpec", "AnalystAgent", "CisMRAgent", "CorrelationAgent", "EpisodeInfo", "MRKnockdownAgent",
    "NullAgent", "Observation", "OpenAIChatAgent", "REFERENCE_AGENTS", "REGISTRY", "ScriptedAgent", "TellsAgent",
    "TransportError", "TruthAgent", "create_agent", "is_project_agent",
]
