"""Seed material as byte patterns, and the scans that look for it in any stream.

Hex windows of ``HEX_WINDOW`` digits (32 bits) identify the seed or the oracle key;
decimal windows are longer because 8-digit numbers occur naturally (positions);
binary windows and whole 64-bit words catch a seed stored as a number."""
from __future__ import annotations

import re
from typing import Iterable, Iterator

import numpy as np

from .secrets import Secrets

#: Hex windows of this length (8 hex digits = 32 bits) identify seed material;
#: decimal windows are longer because 8-digit numbers occur naturally (positions).
HEX_WINDOW, DEC_WINDOW, BIN_WINDOW = 8, 12, 8
_OVERLAP = 64
_HEX_LUT = np.zeros(256, dtype=bool)
_HEX_LUT[np.frombuffer(b"0123456789abcdefABCDEF", dtype=np.uint8)] = True


class Needles:
    """Seed material in every form the audit searches: hex and decimal windows,
    binary windows (little and big endian) and 64-bit words."""

    def __init__(self, secrets: Secrets):
        self.hex, self.dec, self.binary, self.literal = {}, {}, {}, {}
        self.words64 = {}
        for label, value in (("seed", secrets.seed), ("oracle_key", secrets.oracle_key)):
            if value is None:
                continue
            texts = {format(value, "x"), format(value, "032x")}
            if label == "seed":
                for t in secrets.seed_texts:
                    t = t.lower()
                    texts.add(t[2:] if t.startswith("0x") else format(int(t), "x"))
            for t in texts:
                for i in range(len(t) - HEX_WINDOW + 1):
                    self.hex.setdefault(t[i:i + HEX_WINDOW].encode(), f"{label} (hex digits {i}-{i + HEX_WINDOW})")
            d = str(value)
            for i in range(len(d) - DEC_WINDOW + 1):
                self.dec.setdefault(d[i:i + DEC_WINDOW].encode(), f"{label} (decimal digits {i}-{i + DEC_WINDOW})")
            nbytes = max(16, (value.bit_length() + 7) // 8)
            for order in ("little", "big"):
                raw = value.to_bytes(nbytes, order)
                for i in range(0, len(raw) - BIN_WINDOW + 1, 4):
                    self.binary.setdefault(raw[i:i + BIN_WINDOW], f"{label} ({order}-endian bytes {i}-{i + BIN_WINDOW})")
                    self.words64.setdefault(int.from_bytes(raw[i:i + BIN_WINDOW], "little"), f"{label} (64-bit word)")
        if secrets.salt and len(str(secrets.salt)) >= 6:
            self.literal[str(secrets.salt).lower().encode()] = "world.roles_salt"
        self._words64 = np.array(sorted(self.words64), dtype=np.uint64)

    def scan(self, label: str, buf: bytes, binary: bool, hits: list, base: int = 0, limit: int = 50) -> None:
        """Search ``buf`` (which starts at byte ``base`` of the stream ``label``) for
        textual (and, with ``binary``, binary) seed material; append hits."""
        if not buf or len(hits) >= limit:
            return
        for pos, what in self._text_hits(buf):
            hits.append(f"{label} @ byte {base + pos}: {what}")
        if self.literal:
            low = buf.lower()
            for needle, what in self.literal.items():
                pos = low.find(needle)
                if pos >= 0:
                    hits.append(f"{label} @ byte {base + pos}: {what}")
        if binary:
            for needle, what in self.binary.items():
                pos = buf.find(needle)
                if pos >= 0:
                    hits.append(f"{label} @ byte {base + pos}: {what}")

    def _text_hits(self, buf: bytes) -> Iterator[tuple]:
        a = np.frombuffer(buf, dtype=np.uint8)
        m = _HEX_LUT[a].view(np.int8)
        edges = np.diff(m, prepend=np.int8(0), append=np.int8(0))
        starts = np.flatnonzero(edges == 1)
        ends = np.flatnonzero(edges == -1)
        keep = ends - starts >= HEX_WINDOW
        for s, e in zip(starts[keep].tolist(), ends[keep].tolist()):
            run = buf[s:e].lower()
            for i in range(len(run) - HEX_WINDOW + 1):
                what = self.hex.get(run[i:i + HEX_WINDOW])
                if what:
                    yield s + i, what
                    break
            for dm in re.finditer(rb"[0-9]{%d,}" % DEC_WINDOW, run):
                digits = dm.group()
                for i in range(len(digits) - DEC_WINDOW + 1):
                    what = self.dec.get(digits[i:i + DEC_WINDOW])
                    if what:
                        yield s + dm.start() + i, what
                        break

    def scan_stream(self, label: str, chunks: Iterable[bytes], hits: list) -> None:
        """Textual search over a long stream in pieces that overlap, so no window is cut.
        A hit inside the overlap may be reported twice; any hit fails the check."""
        tail, offset = b"", 0
        for chunk in chunks:
            self.scan(label, tail + chunk, False, hits, base=offset - len(tail))
            offset += len(chunk)
            tail = (tail + chunk)[-_OVERLAP:]

    def scan_words(self, label: str, values: np.ndarray, hits: list) -> None:
        """64-bit seed words stored as 8-byte numbers (int64, uint64, float64, timestamps)."""
        values = np.ascontiguousarray(values)
        if values.dtype.itemsize != 8 or values.size == 0:
            return
        found = np.isin(values.view(np.uint64).ravel(), self._words64)
        if found.any():
            i = int(np.flatnonzero(found)[0])
            hits.append(f"{label} @ element {i}: {self.words64[int(values.view(np.uint64).ravel()[i])]}")
