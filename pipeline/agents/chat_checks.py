"""The chat adapter's checks (``pipeline.agents.openai_chat``): ``preflight()``, the one
minimal request before the first turn (None, or one line saying what is wrong), ``probe()``,
the fuller check of ``python -m pipeline.chat_check`` (with the tools protocol the model
must call a trivial tool), and the hint each failure comes with (a missing key, a wrong
route, a parameter the model refuses, a server not parsing tool calls).

One job: whether an endpoint will play.  :class:`ChatChecks` is a mixin of
``OpenAIChatAgent`` (it uses the adapter's request body, wire, content reader and prices).
"""
from __future__ import annotations

import json
import os
from typing import Optional

from .chat_wire import TransportError, _line, normalize_usage
from .tools import ToolCall, ToolSpec

#: The trivial tool of ``preflight()`` and ``probe()`` under the tools protocol.
PING = ToolSpec("ping", "Connection check: call this tool with the word you are asked for.",
                {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"],
                 "additionalProperties": False})


class ChatChecks:
    """The checks of a chat adapter (see the module docstring)."""

    def _diagnose(self, error: TransportError) -> str:
        text = str(error)
        low = text.lower()
        hint = ""
        if error.status in (401, 403):
            if self.api_key_env is None:
                hint = "the endpoint wants a key: set api_key_env to the variable holding it"
            elif not os.environ.get(self.api_key_env):
                hint = f"the environment variable {self.api_key_env} is not set"
            else:
                hint = f"check the key in ${self.api_key_env}"
        elif error.status == 404:
            hint = f"check base_url (most servers' end in /v1) and model={self.model}"
        elif error.status == 400 and self.max_tokens_key in low and self.max_tokens_key == "max_tokens":
            hint = "this model may want max_tokens_key=max_completion_tokens"
        elif error.status == 400 and "temperature" in low:
            hint = "temperature=null leaves the model's default"
        elif error.status == 400 and "tool" in low and self.protocol == "tools":
            hint = ("the server may not accept tools: vLLM needs --enable-auto-tool-choice --tool-call-parser <parser>, "
                    "llama.cpp's server --jinja")
        elif "cannot connect" in low:
            hint = f"is the server running at {self.base_url}?"
        return _line(text + (f" ({hint})" if hint else ""), 600)

    def preflight(self) -> Optional[str]:
        """None when the endpoint answers a minimal request with a chat completion, else one line
        saying what is wrong (down, 401, unknown model or route, a parameter refused, not JSON)."""
        body = self._body([{"role": "user", "content": "Reply with the single word OK."}], max_tokens=1,
                          tools=[PING.openai()] if self.protocol == "tools" else [])
        try:
            self._complete(body, retries=min(self.retries, 1), max_wait=min(self.max_retry_wait_s, 10.0))
        except TransportError as error:
            return self._diagnose(error)
        return None

    def probe(self, max_tokens: Optional[int] = None) -> dict:
        """One check request (``pipeline.chat_check``): {ok, problem, latency_s, usage, cost_usd,
        finish_reason, text, tool_call}.  With the tools protocol the model must call a trivial tool."""
        tools = self.protocol == "tools"
        prompt = ("This is a connection check. Call the tool ping with word set to \"ok\"; write nothing else."
                  if tools else "This is a connection check. Reply with the single word OK.")
        limit = max_tokens if max_tokens is not None else (256 if tools else 1)
        body = self._body([{"role": "user", "content": prompt}], max_tokens=limit,
                          tools=[PING.openai()] if tools else [])
        out: dict = {"ok": False, "problem": None, "latency_s": None, "usage": None, "cost_usd": None,
                     "finish_reason": None, "text": None, "tool_call": None}
        try:
            data, meta = self._complete(body)
        except TransportError as error:
            out["problem"] = self._diagnose(error)
            return out
        choice = data["choices"][0]
        message = choice["message"]
        out.update(latency_s=meta["latency_s"], usage=normalize_usage(data.get("usage")),
                   finish_reason=choice.get("finish_reason"), retries=len(meta["events"]))
        out["cost_usd"] = self.cost(out["usage"])
        text = self._content(message.get("content"), [])
        out["text"] = _line(text, 120) if text else None
        if message.get("refusal") or choice.get("finish_reason") == "content_filter":
            out["problem"] = f"the model refused the check ({_line(message.get('refusal') or 'content_filter', 120)})"
            return out
        if not tools:
            out["ok"] = True
            return out
        raw = message.get("tool_calls")
        first = raw[0] if isinstance(raw, list) and raw and isinstance(raw[0], dict) else None
        function = first.get("function") if first else None
        if not isinstance(function, dict):
            where = ("; it wrote the call as text: the server is not parsing tool calls" if text and "ping" in text
                     else "")
            out["problem"] = (f"the model answered without a tool call (finish_reason {choice.get('finish_reason')}"
                              f"{'; text ' + repr(out['text']) if out['text'] else ''}){where}; protocol=tools needs "
                              "tool calling: vLLM --enable-auto-tool-choice --tool-call-parser <parser>, llama.cpp "
                              "--jinja, an Ollama model with tool support; or use protocol=code_fence")
            return out
        args = function.get("arguments")
        call = ToolCall(function.get("name") if isinstance(function.get("name"), str) else "",
                        args if isinstance(args, str) or args is None else json.dumps(args), first.get("id"))
        parsed, problem = call.parsed()
        out["tool_call"] = {"name": call.name, "arguments": parsed if problem is None else call.arguments}
        if call.name != PING.name:
            out["problem"] = f"the model called {_line(call.name, 60)!r}, not the tool ping"
        elif problem is not None:
            out["problem"] = f"the tool call's {problem}"
        else:
            out["ok"] = True
        return out
