"""The output tree of one world, on any fsspec filesystem:

    <out>/<id>/release/   what an agent or analyst may read
    <out>/<id>/sealed/    truth, latent, oracle, config with seed (scorer/oracle only)
    <out>/<id>/.build/    work-in-progress partitions (removed when the build completes)

Files are written under a ``.wip`` name and renamed when complete, so a
half-written file never looks done.
"""
from __future__ import annotations

import io
import json
import os
import posixpath
from typing import Any

import fsspec

#: Imaged participants per image task (one group of files written, hashed and checked together).
SUBJECTS_PER_TASK = 64
#: When set (to anything but "" or "0") in the workers' environment, each image group is
#: written, read back and checked against the SHA-256 made when it was encoded, and then
#: removed: the pixels go through the whole write path but need no disk beyond the groups
#: in flight (the biobank scale with pixels, 150 GB, on a smaller disk; ``scripts/bench.py
#: --pixel-sink``).  The release manifest still lists every image as built.
PIXEL_SINK_ENV = "DTW_PIXEL_SINK"


def pixel_sink() -> bool:
    return os.environ.get(PIXEL_SINK_ENV, "") not in ("", "0")


def _write_all(fd: int, parts) -> None:
    """Write the concatenation of ``parts`` to ``fd``: one ``writev`` where the system has it,
    continued after a short write."""
    views = [memoryview(part).cast("B") for part in parts]
    views = [v for v in views if v.nbytes]
    if not hasattr(os, "writev"):
        for v in views:
            while v.nbytes:
                v = v[os.write(fd, v):]
        return
    while views:
        done = os.writev(fd, views[:1024])
        while views and done >= views[0].nbytes:
            done -= views[0].nbytes
            views.pop(0)
        if views and done:
            views[0] = views[0][done:]


class Output:
    def __init__(self, out_url: str, world_id: str):
        self.out_url = str(out_url)
        self.fs, root = fsspec.core.url_to_fs(self.out_url)
        self.root = posixpath.join(root.rstrip("/") or "/", world_id) if root else world_id
        self.release = posixpath.join(self.root, "release")
        self.sealed = posixpath.join(self.root, "sealed")
        self.work = posixpath.join(self.root, ".build")

    @property
    def protocol(self) -> str:
        p = self.fs.protocol
        return p[0] if isinstance(p, (tuple, list)) else p

    @property
    def shared_between_processes(self) -> bool:
        """memory:// lives inside one process; everything else is visible to workers."""
        return self.protocol != "memory"

    def url(self, path: str) -> str:
        """A URL for ``path`` that other libraries (zarr, fsspec.open) understand."""
        if self.protocol in ("file", "local"):
            return path
        return f"{self.protocol}://{path.lstrip('/')}" if self.protocol != "memory" else f"memory://{path}"

    def makedirs(self, path: str) -> None:
        self.fs.makedirs(path, exist_ok=True)

    def exists(self, path: str) -> bool:
        return self.fs.exists(path)

    def write_bytes(self, path: str, data: bytes) -> None:
        self.write_parts(path, (data,))

    def write_parts(self, path: str, parts: list) -> None:
        """Write the concatenation of ``parts`` (bytes-like) without joining them first."""
        tmp = path + ".wip"
        if self.protocol in ("file", "local"):
            # the local fast path: thousands of image files per build, each one gathered write
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)
            try:
                fd = os.open(tmp, flags, 0o666)
            except FileNotFoundError:
                os.makedirs(posixpath.dirname(path), exist_ok=True)
                fd = os.open(tmp, flags, 0o666)
            try:
                _write_all(fd, parts)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            return
        self.makedirs(posixpath.dirname(path))
        with self.fs.open(tmp, "wb") as fh:
            for part in parts:
                fh.write(part)
        self.fs.mv(tmp, path)

    def write_text(self, path: str, text: str) -> None:
        self.write_bytes(path, text.encode("utf-8"))

    def write_json(self, path: str, obj: Any) -> None:
        self.write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")

    def read_bytes(self, path: str) -> bytes:
        with self.fs.open(path, "rb") as fh:
            return fh.read()

    def rm(self, path: str, recursive: bool = True) -> None:
        if self.fs.exists(path):
            self.fs.rm(path, recursive=recursive)

    def buffer(self) -> io.BytesIO:
        return io.BytesIO()


#: The version of ``.build/state.json`` (the resumable build's state; its work partitions
#: are reused only under it).
BUILD_STATE_FORMAT = "drugtargetworld-build-state/1"


def resume_or_reset(output: Output, doc: dict, clear: tuple) -> bool:
    """True when ``.build/state.json`` records the digest of ``doc`` (the world-determining
    config): finished work is reused.  Otherwise every folder in ``clear`` is removed, the
    work and release folders are made anew with the new digest, and False is returned.
    A state of another format (an interrupted build of another version) raises
    ``FormatError`` naming the file: its partitions are not this version's to reuse or
    delete (remove the folder, or finish the build with the version that started it); a
    state without a format (written before the state carried one) reads as before."""
    import hashlib

    from .formats import check_format

    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    state = posixpath.join(output.work, "state.json")
    if output.exists(state):
        try:
            recorded = json.loads(output.read_bytes(state))
        except ValueError:
            recorded = None
        if isinstance(recorded, dict):
            if "format" in recorded:
                check_format(recorded["format"], BUILD_STATE_FORMAT, state)
            if recorded.get("digest") == digest:
                return True
    for path in clear:
        output.rm(path)
    output.makedirs(output.work)
    output.makedirs(output.release)
    output.write_json(state, {"format": BUILD_STATE_FORMAT, "digest": digest})
    return False
