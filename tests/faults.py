"""Injected faults shared by the harness tests."""
from __future__ import annotations


def fail_on_call(monkeypatch, module, name: str, n: int, message: str) -> list:
    """Make ``module.name`` raise ``RuntimeError(message)`` on its ``n``-th call (calls
    before and after go to the real function); returns the list that counts the calls."""
    real, calls = getattr(module, name), []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == n:
            raise RuntimeError(message)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, flaky)
    return calls
