"""Work partitions, and which participant blocks each task takes.

A build's work is cut into partitions of fixed participant blocks (1,000
participants each): the partition a value lands in never changes a byte of it,
only which worker computes it and when.
"""
from __future__ import annotations

import hashlib
import posixpath
from typing import TYPE_CHECKING

from ..outputs import Output

if TYPE_CHECKING:  # annotations only: no import at run time
    from ..model.world import World


class Partitions:
    """Work partitions in the manner of bio2zarr: each is written under a ``.wip``
    name and renamed when complete, then a SHA-256 sidecar is written the same
    way.  A rerun of the same config reuses a partition only when its bytes match
    its sidecar, so a partition cut short by a crash is recomputed."""

    def __init__(self, output: Output, stage: str):
        self.output = output
        self.root = posixpath.join(output.work, stage)

    def path(self, key) -> str:
        return posixpath.join(self.root, f"p{key}" if not isinstance(key, int) else f"p{key:05d}")

    def load(self, key) -> bytes | None:
        path = self.path(key)
        fs = self.output.fs
        if not (fs.exists(path) and fs.exists(path + ".sha256")):
            return None
        data = self.output.read_bytes(path)
        want = self.output.read_bytes(path + ".sha256").decode().strip()
        return data if hashlib.sha256(data).hexdigest() == want else None

    def save(self, key, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        self.output.write_bytes(self.path(key), data)
        self.output.write_bytes(self.path(key) + ".sha256", digest.encode())
        return digest


def block_groups(world: World, chunk_blocks: int) -> list:
    """Consecutive blocks, ``chunk_blocks`` to a task."""
    ids = list(range(world.n_blocks))
    return [ids[i:i + chunk_blocks] for i in range(0, len(ids), chunk_blocks)]
