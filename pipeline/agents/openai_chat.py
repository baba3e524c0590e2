"""A policy backed by an OpenAI-compatible chat endpoint (``POST <base_url>/chat/completions``).

The conversation follows S3.2: the system message is the task instructions,
each user message is an observation, and in the history each assistant turn
is only the code the harness extracted from that reply (fenced), never the
reply's prose; a reply without code is carried as "(no code)".  Uses urllib
only.  The API key is read from the environment variable named by
``api_key_env`` (no key, no Authorization header: local servers rarely want
one).

A transport failure (HTTP error after the retries, unreadable JSON, a reply
without content) raises ``TransportError``; the harness then ends the episode
and scores what WORK holds.

``max_history_chars`` bounds the prompt: when the messages exceed it, the
oldest exchanges after the opening message are dropped and a note says how
many.  S3.2's model-written summaries are not reproduced.
"""
from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Optional

from .base import Agent, EpisodeInfo, Observation, fenced


class TransportError(RuntimeError):
    """The endpoint could not produce a reply."""


class OpenAIChatAgent(Agent):
    name = "openai_chat"

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000/v1",
        model: str = "default",
        api_key_env: Optional[str] = "OPENAI_API_KEY",
        temperature: Optional[float] = 0.0,
        max_tokens: Optional[int] = None,
        seed: Optional[int] = None,
        request_timeout: float = 600.0,
        retries: int = 2,
        max_history_chars: Optional[int] = None,
    ):
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url={base_url!r}: invalid; valid: an http(s) URL such as http://127.0.0.1:8000/v1")
        if not isinstance(model, str) or not model:
            raise ValueError(f"model={model!r}: invalid; valid: the endpoint's model name")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key_env = api_key_env
        self.temperature = None if temperature is None else float(temperature)
        self.max_tokens = None if max_tokens is None else int(max_tokens)
        self.seed = None if seed is None else int(seed)
        self.request_timeout = float(request_timeout)
        self.retries = int(retries)
        self.max_history_chars = None if max_history_chars is None else int(max_history_chars)
        self.messages: list[dict] = []
        self.calls: list[dict] = []  # per request: seconds, usage, finish_reason (for the caller's records)

    def reset(self, info: EpisodeInfo) -> None:
        super().reset(info)
        self.messages = [{"role": "system", "content": info.system_prompt}]
        self.calls = []

    def act(self, observation: Observation) -> str:
        if observation.kind != "opening":
            self.messages.append({"role": "assistant",
                                  "content": fenced(observation.code) if observation.code else "(no code)"})
        self.messages.append({"role": "user", "content": observation.text})
        body = {"model": self.model, "messages": self._window()}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.seed is not None:
            body["seed"] = self.seed
        data = self._post(body)
        try:
            choice = data["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise TransportError(f"{self.url}: response without choices[0].message.content") from None
        if not isinstance(content, str):
            raise TransportError(f"{self.url}: message content is {type(content).__name__}, not text")
        if self.calls:
            self.calls[-1].update(finish_reason=choice.get("finish_reason"), usage=data.get("usage"))
        return content

    def _window(self) -> list[dict]:
        if self.max_history_chars is None:
            return list(self.messages)
        head, rest = self.messages[:2], self.messages[2:]
        dropped = 0
        while rest and sum(len(m["content"]) for m in head + rest) > self.max_history_chars:
            # Drop whole exchanges (assistant code + the observation that answered it).
            rest = rest[2:]
            dropped += 1
        if dropped:
            note = {"role": "user", "content": f"[{dropped} earlier turn(s) omitted to fit the context]"}
            return head + [{"role": "assistant", "content": "(continuing)"}, note] + rest
        return head + rest

    def _post(self, body: dict) -> dict:
        payload = json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        last = None
        for attempt in range(self.retries + 1):
            start = time.monotonic()
            request = urllib.request.Request(self.url, data=payload, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.request_timeout) as response:
                    raw = response.read()
                self.calls.append({"seconds": time.monotonic() - start, "attempt": attempt})
                try:
                    return json.loads(raw.decode("utf-8"))
                except (ValueError, UnicodeDecodeError):
                    raise TransportError(f"{self.url}: response is not JSON") from None
            except urllib.error.HTTPError as error:
                last = f"HTTP {error.code}: {error.read()[:300].decode('utf-8', errors='replace')}"
                if error.code not in (408, 409, 429) and error.code < 500:
                    break  # a client error will not change on retry
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as error:
                last = f"{type(error).__name__}: {error}"
            if attempt < self.retries:
                time.sleep(min(2 ** attempt, 30))
        raise TransportError(f"{self.url}: {last}")
