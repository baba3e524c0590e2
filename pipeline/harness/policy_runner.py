"""Runs an external agent inside its policy sandbox (``policy.py``), copied there as
``dtw_policy_runner.py``.  Standard library only; the agent API v1 modules sit beside it
as the package ``pipeline.agents`` (nothing else of the project is visible).

    python -I dtw_policy_runner.py          (first line on stdin: {"factory": "my_pkg.agent:make", "options": {}})

Makes the agent (its first line on the pipe says ``ok`` or the error), then answers one
JSON line per request on stdin: ``reset`` (EpisodeInfo) and ``act`` (Observation), with
``{"ok": <reply>}`` — text, or a reply object (text, tool_calls, usage, cost_usd,
latency_s, events) — or ``{"error": "..."}``.  What the agent prints goes to stderr,
never into the protocol.
"""
import inspect
import json
import os
import sys
import traceback


def _send(stream, obj) -> None:
    stream.write(json.dumps(obj, allow_nan=False, default=str) + "\n")
    stream.flush()


def _factory(request):
    name = request["factory"]  # module:attribute (an entry point is resolved by the harness)
    module, _, attr = name.partition(":")
    import importlib

    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as error:
        raise LookupError(f"agent={name}: cannot import {module} ({error})") from None
    except AttributeError:
        raise LookupError(f"agent={name}: {module} has no attribute {attr}") from None


def _check_options(factory, options, name) -> None:
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    accepted = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n != "self"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise LookupError(f"agent {name}: unknown option(s) {', '.join('agent.' + u for u in unknown)}; valid: "
                          f"{', '.join('agent.' + a for a in sorted(accepted)) or 'none'}")


def _info(data):
    from pipeline.agents.base import EpisodeInfo
    from pipeline.agents.tools import ToolSpec

    data = dict(data)
    data["tools"] = tuple(ToolSpec(**t) for t in data.get("tools") or ())
    return EpisodeInfo(**data)


def _observation(data):
    from pipeline.agents.base import Observation

    data = dict(data)
    for key in ("delivered", "refused", "work_listing", "tool_results"):
        if key in data and isinstance(data[key], list):
            data[key] = tuple(data[key])
    return Observation(**data)


def _reply(value):
    from pipeline.agents.tools import Reply, ToolCall

    if isinstance(value, str):
        return value
    if isinstance(value, Reply):
        return {"text": value.text, "usage": value.usage, "cost_usd": value.cost_usd, "latency_s": value.latency_s,
                "events": [str(e) for e in value.events],
                "tool_calls": [{"name": c.name, "arguments": c.arguments, "id": c.id} if isinstance(c, ToolCall)
                               else c for c in value.tool_calls]}
    raise TypeError(f"act() returned a {type(value).__name__}; valid: text or a pipeline.agents.tools.Reply")


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the agent's own prints go to stderr, never into the protocol
    sys.stdout = sys.stderr
    for entry in reversed(os.environ.get("DTW_POLICY_PATH", "").split(os.pathsep)):
        if entry and entry not in sys.path:
            sys.path.insert(0, entry)
    request = json.loads(sys.stdin.readline())
    name = request["factory"]
    try:
        factory = _factory(request)
        if not callable(factory):
            raise LookupError(f"agent={name}: {type(factory).__name__} is not callable")
        _check_options(factory, request.get("options") or {}, name)
        try:
            agent = factory(**(request.get("options") or {}))
        except Exception as error:
            raise LookupError(f"agent={name}: the factory raised {type(error).__name__}: {error}") from None
        if not callable(getattr(agent, "act", None)):
            raise LookupError(f"agent={name}: the factory returned a {type(agent).__name__}, not an agent; valid: an "
                              "object with act(observation) (subclass pipeline.agents.base.Agent)")
    except LookupError as error:
        _send(protocol, {"error": str(error)})
        return 2
    except Exception as error:  # importing a third-party module can raise anything
        _send(protocol, {"error": f"agent={name}: {type(error).__name__}: {error}"})
        return 2
    _send(protocol, {"ok": getattr(agent, "name", type(agent).__name__)})
    for line in sys.stdin:
        try:
            message = json.loads(line)
            if message.get("op") == "reset":
                reset = getattr(agent, "reset", None)
                if callable(reset):
                    reset(_info(message["info"]))
                _send(protocol, {"ok": None})
            elif message.get("op") == "act":
                _send(protocol, {"ok": _reply(agent.act(_observation(message["observation"])))})
            else:
                _send(protocol, {"error": f"unknown request {message.get('op')!r}"})
        except Exception as error:  # the agent's failure, reported with its own frames only
            tb = traceback.format_exc(limit=-8)
            _send(protocol, {"error": f"{type(error).__name__}: {error}\n{tb[-3000:]}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
