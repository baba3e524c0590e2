"""The analyst's work folder: state between turns, cached tables and arrays, a clock."""
from __future__ import annotations

import json
import os
import time

import numpy as np
import pandas as pd


class Clock:
    """Time left in this turn; work is started only if it can finish before ``limit``."""

    def __init__(self, limit: float, margin: float = 0.62):
        self.start = time.monotonic()
        self.limit = float(limit)
        self.soft = self.start + margin * self.limit

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.soft - time.monotonic()

    def has(self, seconds: float) -> bool:
        return self.left() > seconds


class Store:
    def __init__(self, work: str):
        self.root = os.path.join(work, "analyst")
        os.makedirs(self.root, exist_ok=True)
        self.state_path = os.path.join(self.root, "state.json")
        self.state = self._load_state()

    def _load_state(self) -> dict:
        try:
            with open(self.state_path) as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return {"done": [], "notes": {}}

    def save_state(self) -> None:
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as handle:
            json.dump(self.state, handle, indent=1, sort_keys=True, default=_plain)
        os.replace(tmp, self.state_path)

    def done(self, task: str) -> bool:
        return task in self.state["done"]

    def mark(self, task: str) -> None:
        if task not in self.state["done"]:
            self.state["done"].append(task)
        self.save_state()

    def path(self, name: str) -> str:
        return os.path.join(self.root, name)

    def exists(self, name: str) -> bool:
        return os.path.exists(self.path(name))

    def write_frame(self, name: str, frame: pd.DataFrame) -> None:
        frame = frame.copy()
        frame.columns = [str(c) for c in frame.columns]
        tmp = self.path(name + ".tmp")
        frame.to_parquet(tmp)
        os.replace(tmp, self.path(name))

    def read_frame(self, name: str) -> pd.DataFrame:
        return pd.read_parquet(self.path(name))

    def write_array(self, name: str, array: np.ndarray) -> None:
        tmp = self.path(name + ".tmp.npy")
        np.save(tmp, array)
        os.replace(tmp, self.path(name))

    def read_array(self, name: str, mmap: bool = False) -> np.ndarray:
        return np.load(self.path(name), mmap_mode="r" if mmap else None)

    def write_json(self, name: str, value) -> None:
        tmp = self.path(name + ".tmp")
        with open(tmp, "w") as handle:
            json.dump(value, handle, indent=1, sort_keys=True, default=_plain)
        os.replace(tmp, self.path(name))

    def read_json(self, name: str):
        with open(self.path(name)) as handle:
            return json.load(handle)


def _plain(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return None if not np.isfinite(value) else float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    return str(value)
