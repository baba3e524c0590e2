"""Run one harness episode and print its score JSON.

    python -m pipeline.episode world_dir=<dir> agent=<name> budget=<0|450000|2000000>
        [out=<dir>] [turns=30] [timeout=300] [paper_compat=false]
        [isolation=auto|require|off] [overwrite=false] [agent.<option>=<value> ...]

Arguments are key=value pairs like Hydra overrides.  ``agent`` is one of
null, truth, correlation, cis_mr, mr_knockdown, openai_chat; options of an
agent go as ``agent.<option>=`` (openai_chat: base_url, model, api_key_env,
temperature, max_tokens, seed, request_timeout, retries, max_history_chars).
``out`` defaults to ``<world_dir>/../episodes/<world_id>/<agent>-<budget>/``.

The printed JSON is the score (the six components, total, total_unclipped,
details) plus ``isolated`` and ``isolation`` (whether and how the agent's code
was isolated) and ``episode`` (exit reason, turns, spend, folder).  Exit code 0
for a scored episode (whatever its exit path), 1 when the harness itself
crashed (the episode is recorded with a zero score), 2 for bad arguments.
"""
from __future__ import annotations

import json
import sys

from .agents import REGISTRY, create_agent
from .harness.episode import BUDGETS, DEFAULT_TIMEOUT, DEFAULT_TURNS, Episode, EpisodeError, world_paths
from .harness.sandbox import ISOLATION_MODES, SandboxUnavailable

KEYS = ("world_dir", "agent", "budget", "out", "turns", "timeout", "paper_compat", "isolation", "overwrite")
REQUIRED = ("world_dir", "agent", "budget")


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


def parse(argv: list[str]) -> tuple[dict, dict]:
    args: dict = {}
    options: dict = {}
    for item in argv:
        if "=" not in item:
            raise UsageError(f"{item}: expected key=value; keys: {', '.join(KEYS)}, agent.<option>")
        key, value = item.split("=", 1)
        key = key.lstrip("+")
        if key.startswith("agent."):
            options[key[len("agent."):]] = _option_value(value)
            continue
        if key not in KEYS:
            raise UsageError(f"{key}: unknown key; valid: {', '.join(KEYS)}, agent.<option>")
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
    parsed["isolation"] = args.get("isolation", "auto")
    if parsed["isolation"] not in ISOLATION_MODES:
        raise UsageError(f"isolation={parsed['isolation']}: invalid; valid: {', '.join(ISOLATION_MODES)}")
    parsed["out"] = args.get("out")
    return parsed, options


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from .screening.episode import is_screening_world  # [world-kind seam: screening]

    world_dir = next((a.split("=", 1)[1] for a in argv if a.startswith("world_dir=")), None)
    if world_dir is not None and is_screening_world(world_dir):
        from .screening.episode import main as screening_main

        return screening_main(argv)
    try:
        args, options = parse(argv)
        _, _, sealed = world_paths(args["world_dir"])
        agent = create_agent(args["agent"], sealed_dir=sealed if REGISTRY[args["agent"]].privileged else None,
                             **options)
        episode = Episode(
            args["world_dir"], agent, budget=args["budget"], agent_name=args["agent"], out=args["out"],
            max_turns=args["turns"], timeout=args["timeout"], paper_compat=args["paper_compat"],
            isolation=args["isolation"], overwrite=args["overwrite"],
        )
    except (UsageError, EpisodeError, SandboxUnavailable, ValueError, OSError) as error:
        print(f"pipeline.episode: {error}", file=sys.stderr)
        return 2
    result = episode.run()
    if not result["isolated"]:
        print(f"pipeline.episode: WARNING: this episode was not isolated: {result['isolation']}", file=sys.stderr)
    print(json.dumps(result, indent=2, allow_nan=False, default=str))
    return 1 if result["episode"]["exit_reason"] == "runner_crash" else 0


if __name__ == "__main__":
    sys.exit(main())
