"""Agents by name for every kind of world, and agents from anywhere (API v1).

``agent=<name>`` names a reference agent of the world's kind (the biobank agents of
``pipeline.agents.REGISTRY``, the screening strategies of
``pipeline.screening.agents.REGISTRY``) or an agent that plays every kind
(``openai_chat``).  Anything else is an agent from the user's own package:

``agent=<module>:<factory>``
    ``factory`` (a class or a function) imported from ``module`` (any importable module);
``agent=<name>`` of the entry-point group ``drugtargetworld.agents``
    an installed package's ``[project.entry-points."drugtargetworld.agents"]`` entry,
    e.g. ``my-agent = "my_pkg.agent:make"``.

``agent.<option>=<value>`` options are passed to the factory as keyword arguments; an
option the factory does not take is refused by name (a factory taking ``**options`` takes
any).  The factory must return an :class:`~pipeline.agents.base.Agent` (or an object with
``act(observation)`` and, optionally, ``reset(info)``).  Such agents are not the project's
own code: the policy itself is made and played in a sandbox of its own
(``pipeline.harness.policy``: no release, WORK, sealed bundle or episode folder in view),
and the code it emits runs, as every agent's, in the episode's sandbox with
``isolation=require``.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Optional

from .base import AgentSpec

ENTRY_POINT_GROUP = "drugtargetworld.agents"


class AgentError(ValueError):
    """An agent cannot be made (unknown name, unimportable factory, bad options, not an agent)."""


@dataclass(frozen=True)
class Made:
    """A made agent and where it came from."""

    agent: Any
    name: str  # what the user asked for
    source: str  # "reference", "generic", "module" or "entry point"
    reference: bool  # the project's own code (may run with isolation=auto)

    @property
    def external(self) -> bool:
        return self.source in ("module", "entry point")


def generic_specs() -> dict:
    """Agents that play every kind of world."""
    from .openai_chat import OpenAIChatAgent

    options = {name: "" for name in inspect.signature(OpenAIChatAgent.__init__).parameters if name != "self"}
    return {"openai_chat": AgentSpec("openai_chat", OpenAIChatAgent, options=options,
                                     description="an OpenAI-compatible /chat/completions endpoint "
                                                 "(protocol=code_fence|tools)")}


def kind_specs(kind: str) -> dict:
    """name -> AgentSpec of a kind's own agents (``pipeline.kinds``: each kind's ``agents()``)."""
    from .. import kinds

    registered = kinds.registered()
    if kind not in registered:
        raise AgentError(f"kind {kind!r}: not a registered world kind; valid: {', '.join(registered)}")
    return {name: spec for name, spec in registered[kind].agents().items() if isinstance(spec, AgentSpec)}


def specs(kind: str) -> dict:
    """name -> AgentSpec of the agents ``agent=<name>`` names on a world of ``kind``."""
    registry = kind_specs(kind)
    for name, spec in generic_specs().items():
        registry.setdefault(name, spec)
    return registry


def entry_points() -> dict:
    """name -> entry point of the group ``drugtargetworld.agents`` (installed agent packages)."""
    from importlib.metadata import entry_points as found

    return {ep.name: ep for ep in found(group=ENTRY_POINT_GROUP)}


def create(kind: str, name: str, options: Optional[dict] = None, *, sealed_dir=None, network: bool = True) -> Made:
    """Make the agent ``name`` for a world of ``kind`` (see the module docstring).

    An external agent is made in its own sandbox (``pipeline.harness.policy``), with the
    host's network when ``network`` is true (a policy usually calls its model's endpoint).
    """
    options = dict(options or {})
    if not isinstance(name, str) or not name:
        raise AgentError(f"agent={name!r}: invalid; valid: a reference agent, openai_chat, <module>:<factory> or an "
                         f"installed {ENTRY_POINT_GROUP} entry point")
    registry = specs(kind)
    if name in registry:
        spec = registry[name]
        unknown = sorted(set(options) - set(spec.options))
        if unknown:
            raise AgentError(f"agent {name}: unknown option(s) {', '.join('agent.' + u for u in unknown)}; valid: "
                             f"{', '.join('agent.' + o for o in sorted(spec.options)) or 'none'}")
        try:
            if spec.privileged:
                if sealed_dir is None:
                    raise AgentError(f"agent {name} needs the world's sealed folder (sealed_dir)")
                agent = spec.factory(sealed_dir=sealed_dir, **options)
            else:
                agent = spec.factory(**options)
        except AgentError:
            raise
        except (TypeError, ValueError) as error:
            raise AgentError(f"agent {name}: {error}") from None
        agent.name = name
        source = "reference" if spec.reference else "generic"
        return Made(agent, name, source, spec.reference)
    if ":" in name:
        module, _, attr = name.partition(":")
        if not module or not attr:
            raise AgentError(f"agent={name}: invalid; valid: <module>:<factory>, e.g. my_pkg.agent:make")
        source = "module"
    elif name in entry_points():
        source = "entry point"
    else:
        valid = sorted(registry) + sorted(entry_points())
        raise AgentError(f"agent={name}: unknown for a {kind} world; valid: {', '.join(valid)}, or <module>:<factory>")
    # Code the project has never seen runs in a sandbox of its own (pipeline.harness.policy):
    # made there, it cannot reach the sealed bundle, the world's folder or the harness.
    from ..harness.bwrap import SandboxUnavailable
    from ..harness.policy import PolicyError, SandboxedPolicy

    try:
        agent = SandboxedPolicy(name, options, entry_point=source == "entry point", network=network)
    except PolicyError as error:
        raise AgentError(str(error).splitlines()[0] if str(error) else f"agent={name}: could not be made") from None
    except SandboxUnavailable as error:
        raise AgentError(f"agent={name}: {error}") from None
    return Made(agent, name, source, False)


def is_project_agent(agent: Any) -> bool:
    """True only for an instance of one of a kind's reference agent classes (not a subclass)."""
    from .. import kinds

    for kind in kinds.registered():
        try:
            registry = kind_specs(kind)
        except (ImportError, AgentError):
            continue
        if any(type(agent) is spec.factory for spec in registry.values() if spec.reference):
            return True
    return False


def default_isolation(agent: Any) -> str:
    """"auto" for the project's own reference agents, "require" for any other code."""
    return "auto" if is_project_agent(agent) else "require"
