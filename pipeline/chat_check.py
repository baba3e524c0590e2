"""Check an OpenAI-compatible chat endpoint in one request, before a long run.

    python -m pipeline.chat_check base_url=http://127.0.0.1:8000/v1 model=<name>
        [api_key_env=OPENAI_API_KEY|null] [protocol=code_fence|tools] [timeout=60] [max_tokens=N]
        [max_tokens_key=max_tokens|max_completion_tokens] [temperature=0|null] [extra_body=<JSON object>]
        [price_in_per_mtok=X price_out_per_mtok=Y [price_cached_in_per_mtok=Z]] [retries=1]

Sends what ``agent=openai_chat`` would send (the same adapter, model, key, temperature and
extra body) with a small token limit: with ``protocol=code_fence`` any chat completion
passes; with ``protocol=tools`` the model must answer with a call of a trivial tool (the
server must parse tool calls).  Prints one line: ``ok`` with the latency, the reported
token usage and, with a price table, the cost (exit status 0), or ``error`` with what is
wrong and a hint (exit status 2).  Every option also as ``--key value``; ``--help``,
``--version``.
"""
from __future__ import annotations

import json
import sys

from .commandline import Command, Option, UsageError


def _optional_float(key: str, text: str):
    if str(text).strip().lower() in ("null", "none", ""):
        return None
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"{key}={text}: invalid; valid: a number or null") from None


COMMAND = Command(
    "pipeline.chat_check",
    "Check an OpenAI-compatible /chat/completions endpoint in one request (as agent=openai_chat would call it).",
    [
        Option("base_url", "the endpoint's base URL, e.g. http://127.0.0.1:8000/v1", required=True),
        Option("model", "the model name the endpoint serves", required=True),
        Option("api_key_env", "the environment variable holding the API key (null: send none)",
               default="OPENAI_API_KEY"),
        Option("protocol", "tools also checks that the model returns a tool call", choices=("code_fence", "tools"),
               default="code_fence"),
        Option("timeout", "seconds for the request", kind=float, default=60.0),
        Option("max_tokens", "completion tokens allowed (default 1; 256 with protocol=tools)", kind=int),
        Option("max_tokens_key", "the request's token-limit field (max_completion_tokens for OpenAI's reasoning "
               "models)", default="max_tokens"),
        Option("temperature", "sent as the episode would (null: omitted)", kind=_optional_float, default=0.0),
        Option("extra_body", "a JSON object merged into the request"),
        Option("price_in_per_mtok", "US dollars per million prompt tokens", kind=float),
        Option("price_out_per_mtok", "US dollars per million completion tokens", kind=float),
        Option("price_cached_in_per_mtok", "US dollars per million cached prompt tokens", kind=float),
        Option("retries", "retries on 429, 408, 5xx and connection errors", kind=int, default=1),
    ],
)


def run(args: dict) -> int:
    from .agents.openai_chat import OpenAIChatAgent

    api_key_env = args["api_key_env"]
    if api_key_env is not None and api_key_env.strip().lower() in ("", "null", "none"):
        api_key_env = None
    try:
        agent = OpenAIChatAgent(
            base_url=args["base_url"], model=args["model"], api_key_env=api_key_env, protocol=args["protocol"],
            temperature=args["temperature"], max_tokens_key=args["max_tokens_key"], request_timeout=args["timeout"],
            retries=args["retries"], retry_base_s=0.5, max_retry_wait_s=min(30.0, args["timeout"]),
            extra_body=args["extra_body"], price_in_per_mtok=args["price_in_per_mtok"],
            price_out_per_mtok=args["price_out_per_mtok"], price_cached_in_per_mtok=args["price_cached_in_per_mtok"],
        )
    except ValueError as error:
        print(f"pipeline.chat_check: error: {error}", file=sys.stderr)
        return 2
    if args["max_tokens"] is not None and args["max_tokens"] < 1:
        print(f"pipeline.chat_check: error: max_tokens={args['max_tokens']}: invalid; valid: an integer >= 1",
              file=sys.stderr)
        return 2
    found = agent.probe(max_tokens=args["max_tokens"])
    parts = [f"{args['model']} at {agent.base_url}"]
    if found["latency_s"] is not None:
        parts.append(f"{found['latency_s']:.2f} s")
    usage = found.get("usage")
    if usage:
        parts.append("tokens " + ", ".join(f"{k.replace('_tokens', '')} {v}" for k, v in usage.items()))
    elif found["latency_s"] is not None:
        parts.append("no usage reported")
    if found.get("cost_usd") is not None:
        parts.append(f"${found['cost_usd']:.6f}")
    if found.get("retries"):
        parts.append(f"{found['retries']} retr{'y' if found['retries'] == 1 else 'ies'}")
    where = "; ".join(parts)
    if not found["ok"]:
        print(f"pipeline.chat_check: error: {found['problem']} [{where}]", file=sys.stderr)
        return 2
    if args["protocol"] == "tools":
        call = found["tool_call"]
        what = f"tool call {call['name']}({json.dumps(call['arguments'], ensure_ascii=True)[:80]})"
    else:
        what = f"chat completion (finish_reason {found['finish_reason']})"
    print(f"pipeline.chat_check: ok: {what} [{where}]")
    return 0


def main(argv: list[str] | None = None) -> int:
    return COMMAND.main(argv, run)


if __name__ == "__main__":
    sys.exit(main())
