"""The wire of the chat adapter (``pipeline.agents.openai_chat``): one POST to
``<base_url>/chat/completions`` read against a deadline and a size cap, the failures that
are retried (429, 408, 5xx, connection errors, timeouts, bodies that are not a chat
completion) with exponential backoff and jitter within ``max_retry_wait_s``, the
server's Retry-After, the one-line :class:`TransportError` when the retries are spent,
and the endpoint's reported ``usage``.

One job: a request in, a parsed chat completion (or one clear failure) out.
:class:`ChatWire` is a mixin of ``OpenAIChatAgent``: it reads the adapter's options
(``url``, ``api_key_env``, ``request_timeout``, ``retries``, ``retry_base_s``,
``max_retry_wait_s``, ``max_response_bytes``) and its seeded ``_rng``.
"""
from __future__ import annotations

import email.utils
import http.client
import json
import math
import os
import time
import urllib.error
import urllib.request
from typing import Any, Optional

#: Longest computed backoff between two attempts (a longer Retry-After is honoured, within max_retry_wait_s).
MAX_SINGLE_WAIT_S = 60.0


class TransportError(RuntimeError):
    """The endpoint could not produce a reply (after the retries).  The message is one line;
    ``status`` is the last HTTP status (None for a connection or body problem)."""

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        self.status = status


class _Failure(Exception):
    """One failed attempt: what happened, whether to retry, the server's Retry-After."""

    def __init__(self, text: str, retryable: bool, retry_after: Optional[float] = None,
                 status: Optional[int] = None):
        super().__init__(text)
        self.text, self.retryable, self.retry_after, self.status = text, retryable, retry_after, status


def _line(text: Any, limit: int = 300) -> str:
    """One printable line of at most ``limit`` characters."""
    out = " ".join("".join(c if c.isprintable() else " " for c in str(text)).split())
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _count(value: Any) -> Optional[int]:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return int(value)


def normalize_usage(raw: Any) -> Optional[dict]:
    """The endpoint's ``usage`` as {prompt_tokens, completion_tokens, total_tokens, cached_tokens}
    (only the counts it reported; ``cached_tokens`` from ``prompt_tokens_details``)."""
    if not isinstance(raw, dict):
        return None
    out = {}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = _count(raw.get(key))
        if value is not None:
            out[key] = value
    cached = _count(raw.get("cached_tokens"))
    details = raw.get("prompt_tokens_details")
    if cached is None and isinstance(details, dict):
        cached = _count(details.get("cached_tokens"))
    if cached is not None:
        out["cached_tokens"] = cached
    if "total_tokens" not in out and "prompt_tokens" in out and "completion_tokens" in out:
        out["total_tokens"] = out["prompt_tokens"] + out["completion_tokens"]
    return out or None


def _retry_after(headers: Any) -> Optional[float]:
    """Seconds the server asks to wait (``retry-after-ms``, ``Retry-After`` in seconds or as a date)."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
    except (TypeError, ValueError):
        pass
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
        return max(0.0, seconds) if math.isfinite(seconds) else None
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_excerpt(raw: bytes) -> str:
    """What an error body says: the OpenAI-style error.message when there is one."""
    text = raw.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except ValueError:
        return _line(text, 200)
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict) and error.get("message") is not None:
            return _line(error["message"], 200)
        if isinstance(error, str):
            return _line(error, 200)
        if isinstance(data.get("detail"), str):
            return _line(data["detail"], 200)
    return _line(text, 200)


class ChatWire:
    """The requests of a chat adapter (see the module docstring)."""

    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def backoff(self, attempt: int, retry_after: Optional[float] = None) -> float:
        """Seconds to wait before retry ``attempt + 1``: the server's Retry-After when given, else
        ``retry_base_s * 2**attempt`` with jitter (between half and all of it), at most 60 s."""
        if retry_after is not None:
            return float(retry_after)
        full = min(self.retry_base_s * (2 ** attempt), MAX_SINGLE_WAIT_S)
        return full / 2 + self._rng.random() * full / 2

    def _complete(self, body: dict, *, retries: Optional[int] = None,
                  max_wait: Optional[float] = None) -> tuple[dict, dict]:
        """(the parsed chat completion, {latency_s, attempts, events}); raises TransportError."""
        retries = self.retries if retries is None else retries
        max_wait = self.max_retry_wait_s if max_wait is None else max_wait
        payload = json.dumps(body).encode("utf-8")
        headers = self._headers()
        events: list[str] = []
        waited, attempt = 0.0, 0
        start = time.monotonic()
        while True:
            try:
                data = self._attempt(payload, headers)
            except _Failure as failure:
                tried = f" after {attempt + 1} attempts" if attempt else ""
                if not failure.retryable or attempt >= retries:
                    raise TransportError(f"{self.url}: {failure.text}{tried}", failure.status) from None
                delay = self.backoff(attempt, failure.retry_after)
                if waited + delay > max_wait:
                    asked = "the server asks to wait" if failure.retry_after is not None else "the next wait is"
                    raise TransportError(f"{self.url}: {failure.text}{tried}; {asked} {delay:.3g} s, past "
                                         f"max_retry_wait_s={max_wait:g} ({waited:.3g} s waited)",
                                         failure.status) from None
                events.append(f"retry {attempt + 1}/{retries} in {delay:.2f} s after {failure.text}")
                time.sleep(delay)
                waited += delay
                attempt += 1
                continue
            return data, {"latency_s": time.monotonic() - start, "attempts": attempt + 1, "events": events}

    def _read(self, response: Any, cap: int, deadline: float) -> bytes:
        chunks, total = [], 0
        read = getattr(response, "read1", None) or response.read
        while True:
            if time.monotonic() > deadline:
                raise _Failure(f"no complete response within request_timeout={self.request_timeout:g} s "
                               f"({total:,} bytes read)", True)
            chunk = read(65536)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > cap:
                raise _Failure(f"response larger than max_response_bytes={cap:,} (an endless or runaway "
                               "response); abandoned", True)
            chunks.append(chunk)

    def _attempt(self, payload: bytes, headers: dict) -> dict:
        deadline = time.monotonic() + self.request_timeout
        request = urllib.request.Request(self.url, data=payload, headers=headers, method="POST")
        try:
            response = urllib.request.urlopen(request, timeout=self.request_timeout)
        except urllib.error.HTTPError as error:
            status = error.code
            try:
                raw = self._read(error, 64 * 1024, min(deadline, time.monotonic() + 10))
            except Exception:  # the status says enough; an unreadable error body adds nothing
                raw = b""
            excerpt = _error_excerpt(raw) if raw else _line(error.reason, 200)
            retryable = status in (408, 429) or status >= 500
            raise _Failure(f"HTTP {status}" + (f": {excerpt}" if excerpt else ""), retryable,
                           _retry_after(error.headers) if retryable else None, status) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as error:
            reason = getattr(error, "reason", None) or error
            if isinstance(reason, (TimeoutError,)) or "timed out" in str(reason):
                raise _Failure(f"no response within request_timeout={self.request_timeout:g} s", True) from None
            raise _Failure(f"cannot connect ({_line(f'{type(reason).__name__}: {reason}', 200)})", True) from None
        try:
            with response:
                raw = self._read(response, self.max_response_bytes, deadline)
        except (OSError, http.client.HTTPException) as error:
            if isinstance(error, TimeoutError) or "timed out" in str(error):
                raise _Failure(f"no complete response within request_timeout={self.request_timeout:g} s", True) from None
            raise _Failure(f"the response broke off ({_line(f'{type(error).__name__}: {error}', 200)})", True) from None
        try:
            data = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise _Failure(f"response is not JSON ({len(raw):,} bytes: {_line(raw[:80].decode('utf-8', 'replace'), 80)!r})",
                           True) from None
        if not isinstance(data, dict):
            raise _Failure(f"response is JSON {type(data).__name__}, not a chat completion object", True)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict) or \
                not isinstance(choices[0].get("message"), dict):
            if data.get("error") is not None:
                raise _Failure(f"error in the response: {_error_excerpt(raw)}", True)
            raise _Failure("response without choices[0].message (not a chat completion)", True)
        return data

