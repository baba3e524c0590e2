"""Run one harness episode, on a world of any kind, and print its score JSON.

    python -m pipeline.episode world_dir=<dir> agent=<name> [budget=<0|450000|2000000>]
        [out=<dir>] [turns=N] [timeout=S] [isolation=auto|require|off] [overwrite=false] [quiet=false]
        [paper_compat=false]                     (a biobank world)
        [mode=limited|unrestricted] [clock_hours=H]   (a screening world)
        [limits.memory=16GiB] [limits.processes=256] [limits.work_size=32GiB] [limits.work_files=500000]
        [limits.file_size=8GiB] [limits.tmp_size=2GiB] [agent.<option>=<value> ...]

Every option also as ``--key value`` (``--quiet``, ``--help``, ``--version``).  ``agent``
is a reference agent of the world's kind (biobank: null, truth, correlation, cis_mr,
mr_knockdown, analyst, tells; screening: random, labels_only, invariant_al, pose_al),
``openai_chat`` (any kind; ``agent.base_url=``, ``agent.model=``, ``agent.protocol=
code_fence|tools`` ...), ``<module>:<factory>`` from any importable package, or an installed
entry point of the group ``drugtargetworld.agents``; ``agent=<name> --help`` lists the agent's
options.  ``budget`` is required on a biobank world and not an option on a screening world
(its label budget is part of the world).  ``out`` defaults to
``./episodes/<agent>-<budget or mode>-<time>-<random>/`` (named without the world).
``isolation`` defaults to ``auto`` for the project's reference agents and ``require`` for any
other agent; an agent that is not the project's own always runs with ``require``.  One line per
turn goes to stderr unless ``quiet``.

The printed JSON is the kind's score plus ``isolated``, ``isolation``, ``usage`` (tokens and
cost of a model-backed agent) and ``episode`` (exit reason, turns, folder).  Exit code 0 for
a scored episode (whatever its exit path; a ``harness_error`` episode is scored from WORK and
must not be replayed), 1 when the runner crashed or the sandbox never ran the agent's code, 2
for bad arguments or a refusal to start (e.g. isolation=require where bubblewrap cannot
isolate, a model endpoint that does not answer).
"""
from __future__ import annotations

import sys

from .commandline import Command, Option, UsageError
from .harness.limits import Limits
from .harness.safejson import dumps_safe

LIMIT_KEYS = {"memory": "size", "processes": int, "work_size": "size", "work_files": int, "file_size": "size",
              "tmp_size": "size", "open_files": int, "cpu_seconds": int}


def _budget(key: str, text: str) -> float:
    from .harness.biobank import BUDGETS

    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or value not in BUDGETS:
        raise UsageError(f"{key}={text}: invalid; valid: {', '.join(map(str, BUDGETS))}")
    return value


def _agent_help(partial: dict) -> str:
    """The chosen agent's options, for ``agent=<name> --help``."""
    import inspect

    name = partial.get("agent")
    if not name:
        return "agent=<name> --help lists that agent's options."
    from .agents import registry

    kind = "biobank"
    if partial.get("world_dir"):
        try:
            from .harness.core import open_kind

            kind = open_kind(partial["world_dir"])[1].kind
        except Exception:
            pass
    spec = registry.specs(kind).get(name)
    if spec is not None:
        opts = ", ".join(f"agent.{o}" for o in spec.options) or "none"
        return f"agent {name} ({spec.description}): options {opts}"
    try:
        if ":" in name:
            module, _, attr = name.partition(":")
            import importlib

            factory = getattr(importlib.import_module(module), attr)
        else:
            factory = registry.entry_points()[name].load()
        params = [p for p in inspect.signature(factory).parameters if p not in ("self",)]
        return f"agent {name}: options {', '.join('agent.' + p for p in params) or 'none'}"
    except Exception as error:
        return f"agent {name}: cannot be loaded ({type(error).__name__}: {error})"


COMMAND = Command(
    "pipeline.episode",
    "One harness episode of an agent on a built world (any kind), isolated, scored on every exit path.",
    [
        Option("world_dir", "a built world: <out>/<id> holding release/ and sealed/", required=True, positional=True),
        Option("agent", "a reference agent, openai_chat, <module>:<factory> or a drugtargetworld.agents entry point",
               required=True),
        Option("budget", "dollars on a biobank world (not an option on a screening world)", kind=_budget),
        Option("out", "the episode folder (default ./episodes/<agent>-<budget or mode>-<time>-<random>)"),
        Option("turns", "the turn limit (default: the kind's, 30 biobank, 40/100 screening)", kind=int),
        Option("timeout", "seconds per program (default: the kind's)", kind=float),
        Option("isolation", "how agent code is isolated", choices=("auto", "require", "off")),
        Option("overwrite", "replace an earlier episode in out", kind=bool, default=False),
        Option("quiet", "no per-turn progress on stderr", kind=bool, default=False),
        Option("paper_compat", "a biobank world: the paper's prompt, exit rule, readouts and phenotype rule",
               kind=bool),
        Option("mode", "a screening world: limited (10 h clock) or unrestricted", choices=("limited", "unrestricted")),
        Option("clock_hours", "a screening world's limited-mode clock in hours", kind=float),
    ],
    groups={"agent": "an option of the agent (agent=<name> --help lists them)",
            "limits": f"a per-turn limit of agent programs: {', '.join(LIMIT_KEYS)} (sizes as 16GiB, 512MiB)"},
    help_hook=_agent_help,
)


def _limits(given: dict) -> Limits | None:
    if not given:
        return None
    values = {}
    for name, text in given.items():
        if name not in LIMIT_KEYS:
            raise UsageError(f"limits.{name}: unknown limit; valid: {', '.join('limits.' + k for k in LIMIT_KEYS)}")
        values[name] = Option(f"limits.{name}", "", kind=LIMIT_KEYS[name]).convert(text)
    try:
        return Limits(**values).validate()
    except ValueError as error:
        raise UsageError(str(error)) from None


def prepare(args: dict):
    """(Session, agent) for parsed arguments; raises UsageError (or the harness's errors) before any turn."""
    from .agents.registry import AgentError, create
    from .commandline import scalar
    from .harness.core import Session, open_kind
    from .harness.kind import EpisodeError

    _, kind = open_kind(args["world_dir"])
    options = {k: scalar(v) for k, v in args["agent_options"].items()}
    name = args["agent"]
    try:
        made = create(kind.kind, name, options, sealed_dir=kind.sealed)
    except AgentError as error:
        raise UsageError(str(error)) from None
    isolation = args.get("isolation")
    if made.external and isolation in ("auto", "off"):
        raise UsageError(f"isolation={isolation}: agent {name} is not the project's own code; it always runs with "
                         "isolation=require")
    if isolation is None:
        isolation = "auto" if made.reference else "require"
    preflight = getattr(made.agent, "preflight", None)
    if callable(preflight):
        problem = preflight()
        if problem:
            raise UsageError(f"agent {name}: {problem}")
    kind_options = {k: args[k] for k in ("paper_compat", "mode", "clock_hours") if args.get(k) is not None}
    budget = args.get("budget")
    if budget is not None and float(budget).is_integer():
        budget = int(budget)
    progress = None if args["quiet"] else (lambda line: print(f"pipeline.episode: {line}", file=sys.stderr, flush=True))
    try:
        session = Session(args["world_dir"], budget=budget, agent_name=name, out=args["out"],
                          max_turns=args["turns"], timeout=args["timeout"], isolation=isolation,
                          overwrite=args["overwrite"], limits=_limits(args["limits_options"]), progress=progress,
                          **kind_options)
    except EpisodeError as error:
        raise UsageError(str(error)) from None
    return session, made.agent


def run(args: dict) -> int:
    from .harness.core import play
    from .harness.kind import EpisodeError
    from .harness.sandbox import SandboxUnavailable

    try:
        session, agent = prepare(args)
    except (UsageError, EpisodeError, SandboxUnavailable, ValueError, OSError) as error:
        print(f"pipeline.episode: error: {error}", file=sys.stderr)
        return 2
    result = play(session, agent)
    print(dumps_safe(result, indent=2))
    exit_reason = result["episode"]["exit_reason"]
    detail = (result["episode"].get("exit_detail") or "").strip().splitlines()
    if exit_reason in ("runner_crash", "sandbox_failure"):
        print(f"pipeline.episode: error: {exit_reason}: {detail[-1] if detail else 'no detail'}", file=sys.stderr)
        return 1
    if exit_reason == "harness_error":
        print(f"pipeline.episode: warning: harness_error (scored from WORK; do not replay this episode): "
              f"{detail[-1] if detail else 'no detail'}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    return COMMAND.main(argv, run)


if __name__ == "__main__":
    sys.exit(main())
