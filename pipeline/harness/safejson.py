"""Defensive parsing of everything an agent program writes (requests, submissions).

The standard library's JSON parser accepts ``NaN``, ``Infinity`` and numbers
such as ``1e999`` (which become infinite floats that later refuse to be
written back as JSON), and it recurses once per nesting level.  Agent-written
bytes go through ``loads`` instead, which refuses all of that with a short
reason, and through ``dumps_safe`` on the way out, which can never raise on a
non-finite number.
"""
from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 32


class Refused(ValueError):
    """Agent-written bytes that are not acceptable JSON; the message is a short reason."""


def _constant(name: str):
    raise Refused(f"non-finite number {name}")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Refused(f"number out of range ({text[:20]})")
    return value


def _int(text: str) -> int:
    if len(text) > 40:
        raise Refused("integer too long")
    return int(text)


def _check(value: Any, depth: int, max_string: int) -> None:
    if depth > MAX_DEPTH:
        raise Refused(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        if len(value) > max_string:
            raise Refused(f"a string of {len(value)} characters (at most {max_string})")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check(key, depth + 1, max_string)
            _check(item, depth + 1, max_string)
    elif isinstance(value, list):
        for item in value:
            _check(item, depth + 1, max_string)


def loads(raw: bytes, *, max_bytes: int, max_string: int = 10_000) -> Any:
    """Parse agent-written JSON or raise ``Refused`` with a short reason."""
    if len(raw) > max_bytes:
        raise Refused(f"{len(raw)} bytes (at most {max_bytes})")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused("not valid UTF-8") from None
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except Refused:
        raise
    except RecursionError:
        raise Refused(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:
        raise Refused(f"not valid JSON ({str(error)[:80]})") from None
    _check(value, 0, max_string)
    return value


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps_safe(value: Any, **kwargs) -> str:
    """JSON text of ``value``; non-finite floats become null / "inf" instead of raising."""
    try:
        return json.dumps(value, allow_nan=False, default=str, **kwargs)
    except (ValueError, RecursionError):
        return json.dumps(_finite(value), allow_nan=False, default=str, **kwargs)


def excerpt(value: Any, cap: int = 80) -> str:
    """A short printable form of an agent-supplied value for observations and the ledger."""
    text = value if isinstance(value, str) else repr(value)
    text = text.encode("utf-8", "replace").decode("utf-8")
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= cap else text[:cap] + f"... ({len(text)} characters)"
