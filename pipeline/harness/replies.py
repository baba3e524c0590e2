"""What the episode core (``pipeline.harness.core``) makes of a policy's replies: the
program in a text reply (the last fenced code block), the transcript's bounded record of
a reply, the tool results attached to an observation, and the usage an episode's replies
reported, summed for score.json.

One job: replies in, records out; no state (the session keeps it).
"""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Optional

from ..agents.base import Observation
from . import safeio

#: Characters of a reply kept in the transcript (a longer one keeps its length and SHA-256).
REPLY_CAP = 200_000

_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.S)
_OPEN_FENCE = re.compile(r"```[^\n`]*\n")


def extract_code(reply: Any) -> tuple[Optional[str], str]:
    """(code, how): the last complete fenced block, else the whole reply if it looks like code.

    ``how`` is "fence", "open_fence" (a final fence never closed, e.g. a
    truncated completion: the text after it runs), "whole" or "none".
    """
    if not isinstance(reply, str):
        return None, "none"
    blocks = _FENCE.findall(reply)
    if blocks:
        tail = reply[reply.rfind("```") + 3:]
        # A fence opened after the last closed block is the reply's real last block.
        opened = _OPEN_FENCE.search(reply, reply.rfind("```"))
        if reply.count("```") % 2 == 1 and opened is not None and tail.strip():
            return reply[opened.end():], "open_fence"
        return blocks[-1], "fence"
    opened = _OPEN_FENCE.search(reply)
    if opened is not None and reply.count("```") == 1:
        return reply[opened.end():], "open_fence"
    if "print(" in reply or "import" in reply:
        return reply, "whole"
    return None, "none"


def bounded_reply(reply: Any) -> dict:
    """The transcript's record of a reply: a printable prefix, and when cut, the full length and hash."""
    kept = safeio.bounded_text(reply, REPLY_CAP)
    out = {"reply": kept["text"]}
    if kept.get("truncated"):
        out.update(reply_chars=kept["chars"], reply_sha256=kept["sha256"])
    return out


def usage_totals(usage: dict) -> dict:
    """score.json's ``usage``: the token counts of ``usage`` (total = prompt + completion when
    not reported) and its cost (None when no reply priced itself)."""
    out = {key: int(usage.get(key, 0)) for key in ("prompt_tokens", "completion_tokens", "cached_tokens",
                                                   "total_tokens")}
    if not out["total_tokens"]:
        out["total_tokens"] = out["prompt_tokens"] + out["completion_tokens"]
    out["cost_usd"] = float(usage["cost_usd"]) if "cost_usd" in usage else None
    return out


def with_results(observation: Observation, results: list) -> Observation:
    """``observation`` carrying the results of the tool calls of one reply ((id, name, text) each)."""
    return replace(observation, tool_results=tuple(
        {"id": i, "name": n, "text": t} for i, n, t in results))

