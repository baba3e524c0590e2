"""A policy backed by an OpenAI-compatible chat endpoint (``POST <base_url>/chat/completions``).

Two protocols (``protocol=``):

``code_fence`` (the default; S3.2, the paper's loop)
    The system message is the task instructions, each user message an observation, and
    in the history each assistant turn is only the code the harness extracted from that
    reply (fenced), never the reply's prose; a reply without code is carried as
    "(no code)".
``tools``
    The model is given the episode's tools (``info.tools``: ``run_python`` first, then the
    kind's actions) as OpenAI function tools, and the system message is the instructions
    plus ``info.tool_note``.  The history is a proper chat history: the assistant messages
    with their ``tool_calls``, and one ``role: tool`` message answering each call's id
    with what the harness answered (``observation.tool_results``); a reply without tool
    calls is answered by a user message holding the observation.  Tool calls reach the
    harness as they came (``ToolCall(name, arguments JSON text, id)``): arguments that are
    not JSON, not an object or too long, and tools the episode does not have, are refused
    there with a notice the model reads in the tool message; the adapter notes them as
    events for the transcript.  Calls without an id (some local servers) get one.

Every ``act()`` returns a :class:`~pipeline.agents.tools.Reply` with the endpoint's
reported ``usage`` (``prompt_tokens``, ``completion_tokens``, ``total_tokens`` and, when
reported as ``prompt_tokens_details.cached_tokens``, ``cached_tokens``), its cost when a
price table is given (``price_in_per_mtok``, ``price_out_per_mtok`` and optionally
``price_cached_in_per_mtok``, US dollars per million tokens; cached prompt tokens are
billed at the cached price, or the input price without one; ``cost_usd`` is None without
a price table), the latency (the request(s) behind the reply, retries included) and
events (retries, a refusal, a cut reply, refused tool calls).

Failures.  A 429, 408 or 5xx status, a connection error, a timeout, a body that is not
JSON or not a chat completion, and a body larger than ``max_response_bytes`` (an endless
or runaway response) are retried with exponential backoff and jitter (``retry_base_s``
doubling, at most ``retries`` times), honouring ``Retry-After`` (and ``retry-after-ms``),
while the sum of the waits stays within ``max_retry_wait_s``; any other 4xx is not
retried.  A request is abandoned after ``request_timeout`` seconds (connecting,
waiting or reading: the body is read against a deadline, so a trickling stream cannot
hold it).  When the retries are spent, ``TransportError`` (one line) is raised: the
harness records it as the exit reason ``transport_failure`` and scores what WORK holds.
A refusal (``message.refusal``, or ``finish_reason`` "content_filter") and an empty reply
are turns without code: the turn is used, the event recorded and (``tools``) the next
message says so.

``preflight()`` sends one minimal request (the episode's parameters, a 1-token limit; with
``tools`` a trivial tool as well) before the first turn and returns None or a one-line
problem (server down, 401, unknown model or route, a parameter the model refuses, not
JSON); ``pipeline.episode`` refuses to start on a problem.  ``probe()`` is the fuller check
of ``python -m pipeline.chat_check``.

The API key is read from the environment variable named by ``api_key_env`` (no key, no
Authorization header: local servers rarely want one); the key is never logged.
``max_history_chars`` bounds the prompt: the oldest exchanges after the opening message
are dropped whole (an assistant message with every tool message answering it) and a note
says how many; the latest exchange is always kept.  S3.2's model-written summaries are not
reproduced.  Uses urllib only.

This module is the policy (the conversation: history, requests' bodies, replies, tool
calls, prices); its requests are ``pipeline.agents.chat_wire`` and its checks
``pipeline.agents.chat_checks`` (their names are importable from here too).
"""
from __future__ import annotations

import json
import math
import random
import re
from typing import Any, Optional

from .base import Agent, EpisodeInfo, Observation, fenced
from .chat_checks import PING, ChatChecks
from .chat_wire import MAX_SINGLE_WAIT_S, ChatWire, TransportError, _line, normalize_usage
from .tools import MAX_ARGUMENT_CHARS, RUN_PYTHON, Reply, ToolCall

PROTOCOLS = ("code_fence", "tools")
#: Tool calls of one reply passed on (the rest are dropped, with an event and a notice).
MAX_TOOL_CALLS_PER_REPLY = 64
#: Characters of a reply's prose kept in the ``tools`` history.
HISTORY_TEXT_CAP = 20_000
_RESERVED_BODY = ("model", "messages", "tools")
_NAME_OK = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _number(name: str, value: Any, *, minimum: float = 0.0, optional: bool = True, integer: bool = False,
            strict: bool = False) -> Any:
    """An option's number, checked (one-line ValueError naming the option)."""
    if value is None and optional:
        return None
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
            (value <= minimum if strict else value < minimum) or (integer and int(value) != value):
        relation = ">" if strict else ">="
        raise ValueError(f"{name}={value!r}: invalid; valid: {kind} {relation} {minimum:g}"
                         + (" or null" if optional else ""))
    return int(value) if integer else float(value)


class OpenAIChatAgent(ChatChecks, ChatWire, Agent):
    name = "openai_chat"

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000/v1",
        model: str = "default",
        api_key_env: Optional[str] = "OPENAI_API_KEY",
        protocol: str = "code_fence",
        temperature: Optional[float] = 0.0,
        max_tokens: Optional[int] = None,
        max_tokens_key: str = "max_tokens",
        seed: Optional[int] = None,
        request_timeout: float = 600.0,
        retries: int = 5,
        retry_base_s: float = 1.0,
        max_retry_wait_s: float = 120.0,
        max_response_bytes: int = 16 * 1024 * 1024,
        max_history_chars: Optional[int] = None,
        price_in_per_mtok: Optional[float] = None,
        price_out_per_mtok: Optional[float] = None,
        price_cached_in_per_mtok: Optional[float] = None,
        extra_body: Any = None,
    ):
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url={base_url!r}: invalid; valid: an http(s) URL such as http://127.0.0.1:8000/v1")
        if isinstance(model, (int, float)) and not isinstance(model, bool):
            model = str(model)
        if not isinstance(model, str) or not model:
            raise ValueError(f"model={model!r}: invalid; valid: the endpoint's model name")
        if api_key_env in ("", "none", "null"):
            api_key_env = None
        if api_key_env is not None and (not isinstance(api_key_env, str) or not _ENV_NAME.fullmatch(api_key_env)):
            # The value is not echoed: it may be the key itself, passed by mistake.
            raise ValueError("api_key_env: not an environment variable name; valid: the NAME of the variable holding "
                             "the key (e.g. OPENAI_API_KEY), or null for no key")
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol={protocol!r}: invalid; valid: {', '.join(PROTOCOLS)}")
        if not isinstance(max_tokens_key, str) or not _NAME_OK.fullmatch(max_tokens_key):
            raise ValueError(f"max_tokens_key={max_tokens_key!r}: invalid; valid: max_tokens or max_completion_tokens")
        if isinstance(extra_body, str):
            try:
                extra_body = json.loads(extra_body)
            except ValueError:
                raise ValueError("extra_body: not JSON; valid: a JSON object merged into each request, e.g. "
                                 "'{\"top_p\": 0.9}'") from None
        if extra_body is not None and not isinstance(extra_body, dict):
            raise ValueError("extra_body: invalid; valid: a JSON object merged into each request")
        reserved = sorted(set(extra_body or {}) & set(_RESERVED_BODY))
        if reserved:
            raise ValueError(f"extra_body: may not set {', '.join(reserved)} (the adapter's own)")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.protocol = protocol
        self.temperature = _number("temperature", temperature)
        self.max_tokens = _number("max_tokens", max_tokens, minimum=1, integer=True)
        self.max_tokens_key = max_tokens_key
        self.seed = None if seed is None else _number("seed", seed, minimum=-2 ** 63, integer=True)
        self.request_timeout = _number("request_timeout", request_timeout, optional=False, strict=True)
        self.retries = _number("retries", retries, optional=False, integer=True)
        self.retry_base_s = _number("retry_base_s", retry_base_s, optional=False)
        self.max_retry_wait_s = _number("max_retry_wait_s", max_retry_wait_s, optional=False)
        self.max_response_bytes = _number("max_response_bytes", max_response_bytes, minimum=1024, optional=False,
                                          integer=True)
        self.max_history_chars = _number("max_history_chars", max_history_chars, minimum=1, integer=True)
        self.price_in = _number("price_in_per_mtok", price_in_per_mtok)
        self.price_out = _number("price_out_per_mtok", price_out_per_mtok)
        self.price_cached = _number("price_cached_in_per_mtok", price_cached_in_per_mtok)
        if (self.price_in is None) != (self.price_out is None) or (self.price_cached is not None and self.price_in is None):
            raise ValueError("price_in_per_mtok, price_out_per_mtok: give both (US dollars per million tokens; "
                             "price_cached_in_per_mtok optionally with them) or none")
        self.extra_body = dict(extra_body or {})
        self.messages: list[dict] = []
        self.calls: list[dict] = []  # per request: seconds, attempts, usage, finish_reason
        self.tool_specs: list[dict] = []
        self.tool_names: set = set()
        self._pending: list[tuple[str, str]] = []  # (id, name) of the last reply's tool calls
        self._notice: Optional[str] = None  # said in front of the next observation (tools protocol)
        self._serial = 0
        self._rng = random.Random(self.seed)

    # ------------------------------------------------------------------ the episode

    def reset(self, info: EpisodeInfo) -> None:
        super().reset(info)
        self.calls, self._pending, self._notice, self._serial = [], [], None, 0
        self._rng = random.Random(self.seed)
        if self.protocol == "tools":
            tools = tuple(getattr(info, "tools", ()) or ()) or (RUN_PYTHON,)
            self.tool_specs = [t.openai() for t in tools]
            self.tool_names = {t.name for t in tools}
            note = getattr(info, "tool_note", "") or ""
            system = info.system_prompt + ("\n\n" + note if note else "")
        else:
            self.tool_specs, self.tool_names = [], set()
            system = info.system_prompt
        self.messages = [{"role": "system", "content": system}]

    def act(self, observation: Observation) -> Reply:
        if self.protocol == "tools":
            self._absorb_tools(observation)
        else:
            self._absorb_fence(observation)
        data, meta = self._complete(self._body(self._window()))
        return self._reply(data, meta)

    def _absorb_fence(self, observation: Observation) -> None:
        if observation.kind != "opening":
            self.messages.append({"role": "assistant",
                                  "content": fenced(observation.code) if observation.code else "(no code)"})
        self.messages.append({"role": "user", "content": observation.text})

    def _absorb_tools(self, observation: Observation) -> None:
        notice, self._notice = self._notice, None
        if observation.kind == "opening" or not self._pending:
            text = observation.text if notice is None else f"[{notice}]\n{observation.text}"
            self.messages.append({"role": "user", "content": text})
            self._pending = []
            return
        results = {}
        for item in observation.tool_results or ():
            if isinstance(item, dict) and item.get("id") is not None:
                results.setdefault(item["id"], item)
        for call_id, _ in self._pending:
            found = results.get(call_id)
            text = found.get("text") if found is not None else None
            self.messages.append({"role": "tool", "tool_call_id": call_id,
                                  "content": text if isinstance(text, str) else observation.text})
        self._pending = []
        if notice is not None:
            self.messages.append({"role": "user", "content": f"[{notice}]"})

    def _body(self, messages: list, *, max_tokens: Optional[int] = None, tools: Optional[list] = None) -> dict:
        body: dict = {"model": self.model, "messages": messages}
        tools = self.tool_specs if tools is None else tools
        if tools:
            body["tools"] = tools
        if self.temperature is not None:
            body["temperature"] = self.temperature
        limit = max_tokens if max_tokens is not None else self.max_tokens
        if limit is not None:
            body[self.max_tokens_key] = limit
        if self.seed is not None:
            body["seed"] = self.seed
        for key, value in self.extra_body.items():
            body.setdefault(key, value)
        return body

    # ------------------------------------------------------------------ a reply

    def _reply(self, data: dict, meta: dict) -> Reply:
        choice = data["choices"][0]
        message = choice["message"]
        finish = choice.get("finish_reason")
        events = list(meta["events"])
        usage = normalize_usage(data.get("usage"))
        cost = self.cost(usage)
        if usage is None:
            events.append("the endpoint reported no token usage" + ("; cost unknown" if self.price_in is not None else ""))
        self.calls.append({"seconds": meta["latency_s"], "attempts": meta["attempts"], "usage": usage,
                           "finish_reason": finish})
        text = self._content(message.get("content"), events)
        refusal = message.get("refusal")
        if refusal or finish == "content_filter":
            why = _line(refusal, 300) if refusal else "finish_reason content_filter"
            events.append(f"refusal: {why} (the turn is used)")
            if self.protocol == "tools":
                self.messages.append({"role": "assistant", "content": _line(refusal, 2000) if refusal else "(refused)"})
                self._pending = []
                self._notice = ("Your previous reply was a refusal or was blocked by the endpoint's filter; it ran no "
                                "program and used a turn.")
            return Reply(text=None, usage=usage, cost_usd=cost, latency_s=meta["latency_s"], events=tuple(events))
        if finish == "length":
            events.append("the reply was cut at the token limit (finish_reason length)")
        calls: list[ToolCall] = []
        history_calls: list[dict] = []
        raw_calls = message.get("tool_calls")
        if self.protocol == "tools":
            calls, history_calls = self._tool_calls(raw_calls, events)
        elif raw_calls:
            events.append("the reply held tool calls, which the code_fence protocol ignores")
        if self.protocol == "tools":
            entry: dict = {"role": "assistant", "content": (text or "")[:HISTORY_TEXT_CAP] or None}
            if history_calls:
                entry["tool_calls"] = history_calls
            elif not text:
                entry["content"] = "(empty reply)"
            self.messages.append(entry)
            self._pending = [(c.id, c.name) for c in calls]
            if not calls:
                self._notice = ("Your previous reply called no tool (a fenced block in it, if any, ran as a "
                                "program); call run_python to run a program. A reply without a tool call uses a turn.")
        if not calls and not (text or "").strip():
            events.append("empty reply: neither code nor tool calls (the turn is used)")
        return Reply(text=text, tool_calls=tuple(calls), usage=usage, cost_usd=cost, latency_s=meta["latency_s"],
                     events=tuple(events))

    @staticmethod
    def _content(content: Any, events: list) -> Optional[str]:
        if content is None or isinstance(content, str):
            return content
        if isinstance(content, list):  # content parts
            parts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
            return "".join(parts)
        events.append(f"message content of type {type(content).__name__} ignored")
        return None

    def _tool_calls(self, raw: Any, events: list) -> tuple[list, list]:
        """(ToolCalls for the harness, the same calls for the history) from a message's tool_calls."""
        if raw is None:
            return [], []
        if not isinstance(raw, list):
            events.append(f"tool_calls of type {type(raw).__name__} ignored")
            self._notice = "Your previous reply's tool_calls were not a list and were ignored."
            return [], []
        if len(raw) > MAX_TOOL_CALLS_PER_REPLY:
            events.append(f"{len(raw)} tool calls in one reply: the first {MAX_TOOL_CALLS_PER_REPLY} were played")
            self._notice = (f"Your previous reply held {len(raw)} tool calls; only the first {MAX_TOOL_CALLS_PER_REPLY} "
                            "were played.")
            raw = raw[:MAX_TOOL_CALLS_PER_REPLY]
        self._serial += 1
        calls, history, seen = [], [], set()
        for i, item in enumerate(raw):
            function = item.get("function") if isinstance(item, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            args = function.get("arguments") if isinstance(function, dict) else None
            name = name if isinstance(name, str) and name else "(no name)"
            if args is None:
                args = ""
            elif not isinstance(args, str):  # some servers send the object itself
                try:
                    args = json.dumps(args)
                except (TypeError, ValueError):
                    args = repr(args)
            call_id = item.get("id") if isinstance(item, dict) else None
            if not isinstance(call_id, str) or not call_id or call_id in seen or len(call_id) > 200:
                call_id = f"call_{self._serial}_{i + 1}"
            seen.add(call_id)
            call = ToolCall(name, args, call_id)
            calls.append(call)
            parsed, problem = call.parsed()
            label = _line(name, 60)
            if name not in self.tool_names:
                events.append(f"tool call {i + 1}: unknown tool {label!r} (refused)")
            elif problem is not None:
                events.append(f"tool call {i + 1} ({label}): {problem} (refused)")
            # The history keeps a valid name and JSON-object arguments (strict servers check them).
            safe_name = name if _NAME_OK.fullmatch(name) else (re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "unnamed")
            safe_args = args if problem is None and len(args) <= MAX_ARGUMENT_CHARS else json.dumps(
                {"unusable_arguments": _line(args, 200), "chars": len(args)})
            if problem is None and args == "":
                safe_args = "{}"
            history.append({"id": call_id, "type": "function", "function": {"name": safe_name, "arguments": safe_args}})
        return calls, history

    def cost(self, usage: Optional[dict]) -> Optional[float]:
        """US dollars for one call's usage by the price table (None without one, or without usage)."""
        if self.price_in is None or not usage or not ({"prompt_tokens", "completion_tokens"} & set(usage)):
            return None
        prompt = usage.get("prompt_tokens", 0)
        cached = min(usage.get("cached_tokens", 0), prompt)
        cached_price = self.price_cached if self.price_cached is not None else self.price_in
        return ((prompt - cached) * self.price_in + cached * cached_price
                + usage.get("completion_tokens", 0) * self.price_out) / 1e6

    # ------------------------------------------------------------------ the history window

    @staticmethod
    def _chars(message: dict) -> int:
        n = len(message.get("content") or "")
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            n += len(function.get("name", "")) + len(function.get("arguments", ""))
        return n

    def _window(self) -> list[dict]:
        if self.max_history_chars is None:
            return list(self.messages)
        head, rest = self.messages[:2], self.messages[2:]
        # Exchanges: an assistant message and everything answering it, up to the next one.
        groups: list[list[dict]] = []
        for message in rest:
            if message["role"] == "assistant" or not groups:
                groups.append([])
            groups[-1].append(message)
        total = sum(self._chars(m) for m in head + rest)
        dropped = 0
        while len(groups) > 1 and total > self.max_history_chars:
            total -= sum(self._chars(m) for m in groups.pop(0))
            dropped += 1
        kept = [m for group in groups for m in group]
        if dropped:
            note = {"role": "user", "content": f"[{dropped} earlier turn(s) omitted to fit the context]"}
            return head + [{"role": "assistant", "content": "(continuing)"}, note] + kept
        return head + kept



__all__ = ["MAX_SINGLE_WAIT_S", "MAX_TOOL_CALLS_PER_REPLY", "HISTORY_TEXT_CAP", "PING", "PROTOCOLS", "ChatChecks",
           "ChatWire", "OpenAIChatAgent", "TransportError", "normalize_usage"]
