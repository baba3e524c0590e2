"""Run one harness episode and print its score JSON.

    python -m pipeline.episode world_dir=<dir> agent=<name> budget=<0|450000|2000000>
        [out=<dir>] [turns=30] [timeout=300] [paper_compat=false]
        [isolation=auto|require|off] [overwrite=false] [quiet=false | --quiet]
        [limits.memory=16GiB] [limits.processes=256] [limits.work_size=32GiB]
        [limits.file_size=8GiB] [limits.tmp_size=2GiB] [agent.<option>=<value> ...]

Arguments are key=value pairs like Hydra overrides.  ``agent`` is one of
null, truth, correlation, cis_mr, mr_knockdown, openai_chat; options of an
agent go as ``agent.<option>=`` (openai_chat: base_url, model, api_key_env,
temperature, max_tokens, seed, request_timeout, retries, max_history_chars).
``out`` defaults to ``./episodes/<agent>-<budget>-<time>-<random>/`` (named
without the world).  ``isolation`` defaults to ``require`` for agents whose
code is not the project's own (openai_chat) and ``auto`` for the reference
agents.  One line per turn (turn, action, spend) goes to stderr unless
``--quiet``.

The printed JSON is the score (the six components, total, total_unclipped,
details) plus ``isolated`` and ``isolation`` (whether and how the agent's code
was isolated) and ``episode`` (exit reason, turns, spend, folder).  Exit code 0
for a scored episode (whatever its exit path), 1 when the harness itself
crashed or the sandbox never ran the agent's code (recorded in score.json
with the reason), 2 for bad arguments or a refusal to start (e.g.
isolation=require where bubblewrap cannot isolate).
"""
from __future__ import annotations

import json
import sys

from .harness.safejson import dumps_safe

from .agents import REGISTRY, create_agent
from .harness.episode import BUDGETS, DEFAULT_TIMEOUT, DEFAULT_TURNS, Episode, EpisodeError, world_paths
from .harness.limits import GiB, MiB, Limits
from .harness.sandbox import ISOLATION_MODES, SandboxUnavailable

KEYS = ("world_dir", "agent", "budget", "out", "turns", "timeout", "paper_compat", "isolation", "overwrite", "quiet")
LIMIT_KEYS = ("memory", "processes", "work_size", "file_size", "tmp_size")
REQUIRED = ("world_dir", "agent", "budget")
_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": MiB, "mb": MiB, "mib": MiB,
          "g": GiB, "gb": GiB, "gib": GiB, "t": 1024 * GiB, "tb": 1024 * GiB, "tib": 1024 * GiB}


class UsageError(ValueError):
    pass


def _bool(key: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise UsageError(f"{key}={text}: invalid; valid: true or false")


def _option_value(text: str):
    """An agent option: JSON scalars (numbers, true/false/null) as such, anything else as a string."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, (int, float, bool)) or value is None else text


def _limit_value(key: str, text: str) -> int:
    import re

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS or (key == "processes" and unit):
        valid = "an integer" if key == "processes" else "a size such as 16GiB, 512MiB or bytes"
        raise UsageError(f"limits.{key}={text}: invalid; valid: {valid}")
    return int(float(match.group(1)) * _UNITS[unit])


def parse(argv: list[str]) -> tuple[dict, dict]:
    args: dict = {}
    options: dict = {}
    limits: dict = {}
    for item in argv:
        if item in ("--quiet", "-q"):
            item = "quiet=true"
        if "=" not in item:
            raise UsageError(f"{item}: expected key=value; keys: {', '.join(KEYS)}, agent.<option>")
        key, value = item.split("=", 1)
        key = key.lstrip("+")
        if key.startswith("agent."):
            options[key[len("agent."):]] = _option_value(value)
            continue
        if key.startswith("limits."):
            name = key[len("limits."):]
            if name not in LIMIT_KEYS:
                raise UsageError(f"{key}: unknown limit; valid: {', '.join('limits.' + k for k in LIMIT_KEYS)}")
            limits[name] = _limit_value(name, value)
            continue
        if key not in KEYS:
            raise UsageError(f"{key}: unknown key; valid: {', '.join(KEYS)}, limits.<name>, agent.<option>")
        if key in args:
            raise UsageError(f"{key}: given twice")
        args[key] = value
    missing = [k for k in REQUIRED if k not in args]
    if missing:
        raise UsageError(f"missing {', '.join(k + '=' for k in missing)}; usage: world_dir=<dir> agent=<name> budget=<{'|'.join(map(str, BUDGETS))}>")

    parsed: dict = {"world_dir": args["world_dir"], "agent": args["agent"]}
    if args["agent"] not in REGISTRY:
        raise UsageError(f"agent={args['agent']}: unknown; valid: {', '.join(REGISTRY)}")
    try:
        budget = float(args["budget"])
    except ValueError:
        budget = None
    if budget is None or budget not in BUDGETS:
        raise UsageError(f"budget={args['budget']}: invalid; valid: {', '.join(map(str, BUDGETS))}")
    parsed["budget"] = int(budget)
    try:
        parsed["turns"] = int(args.get("turns", DEFAULT_TURNS))
        if parsed["turns"] < 1:
            raise ValueError
    except ValueError:
        raise UsageError(f"turns={args.get('turns')}: invalid; valid: an integer >= 1") from None
    try:
        parsed["timeout"] = float(args.get("timeout", DEFAULT_TIMEOUT))
        if not parsed["timeout"] > 0 or parsed["timeout"] == float("inf"):
            raise ValueError
    except ValueError:
        raise UsageError(f"timeout={args.get('timeout')}: invalid; valid: seconds > 0") from None
    parsed["paper_compat"] = _bool("paper_compat", args.get("paper_compat", "false"))
    parsed["overwrite"] = _bool("overwrite", args.get("overwrite", "false"))
    parsed["quiet"] = _bool("quiet", args.get("quiet", "false"))
    parsed["isolation"] = args.get("isolation")
    if parsed["isolation"] is not None and parsed["isolation"] not in ISOLATION_MODES:
        raise UsageError(f"isolation={parsed['isolation']}: invalid; valid: {', '.join(ISOLATION_MODES)}")
    parsed["out"] = args.get("out")
    try:
        parsed["limits"] = Limits(**limits).validate() if limits else None
    except ValueError as error:
        raise UsageError(str(error)) from None
    return parsed, options


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    from . import kinds

    world_dir = next((a.split("=", 1)[1] for a in argv if a.startswith("world_dir=")), None)
    kind = kinds.for_world(world_dir) if world_dir is not None else kinds.BIOBANK
    if kind is not kinds.BIOBANK:  # another kind of world has its own harness, tools and prompt
        return kind.episode_main(argv)
    return biobank_main(argv)


def biobank_main(argv: list[str]) -> int:
    """One episode in a biobank world."""
    try:
        args, options = parse(argv)
        _, _, sealed = world_paths(args["world_dir"])
        agent = create_agent(args["agent"], sealed_dir=sealed if REGISTRY[args["agent"]].privileged else None,
                             **options)
        progress = None if args["quiet"] else (lambda line: print(f"pipeline.episode: {line}", file=sys.stderr, flush=True))
        episode = Episode(
            args["world_dir"], agent, budget=args["budget"], agent_name=args["agent"], out=args["out"],
            max_turns=args["turns"], timeout=args["timeout"], paper_compat=args["paper_compat"],
            isolation=args["isolation"], overwrite=args["overwrite"], limits=args["limits"], progress=progress,
        )
    except (UsageError, EpisodeError, SandboxUnavailable, ValueError, OSError) as error:
        print(f"pipeline.episode: {error}", file=sys.stderr)
        return 2
    result = episode.run()
    print(dumps_safe(result, indent=2))
    exit_reason = result["episode"]["exit_reason"]
    if exit_reason in ("runner_crash", "sandbox_failure"):
        detail = (result["episode"].get("exit_detail") or "").strip().splitlines()
        print(f"pipeline.episode: error: {exit_reason}: {detail[-1] if detail else 'no detail'}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
