"""World seeds and named random streams.

A world seed is a secret integer of at least 128 bits.  Every random draw of a
build comes from a *named stream* keyed by ``(seed, stream name, block)`` where
``block`` is a fixed-size participant block (or 0 for world-level draws), so a
value never depends on the scheduler, the worker count, the Dask chunking or the
order in which tasks run.  Every name is registered once in :mod:`pipeline.streams`;
an unregistered name is an error.
"""
from __future__ import annotations

import hashlib
import secrets

import numpy as np

from . import streams

MIN_SEED_BITS = 128


class SeedError(ValueError):
    pass


def parse_seed(value, field: str = "world.seed") -> int:
    """Return the integer seed for ``value`` (hex string, decimal string or int).

    Seeds shorter than 128 bits are refused: a short seed could be brute-forced
    from the release by anyone holding the generator's code.
    """
    if value is None or (isinstance(value, str) and value.strip() == ""):
        raise SeedError(f"{field}: no seed given; valid: a seed, or for held-out worlds a sealed seed file (seeds=<path>)")
    if isinstance(value, bool):
        raise SeedError(f"{field}: {value!r} is not a seed; valid: a 0x-prefixed hex string of at least 32 hex digits")
    if isinstance(value, int):
        seed = value
    else:
        text = str(value).strip().lower()
        try:
            seed = int(text, 16) if text.startswith("0x") else int(text, 10)
        except ValueError:
            raise SeedError(f"{field}: {value!r} is not a seed; valid: an integer or a 0x-prefixed hex string") from None
    if seed < 0 or seed.bit_length() < MIN_SEED_BITS - 8:
        raise SeedError(
            f"{field}: seed has {max(seed.bit_length(), 0)} bits; valid: at least {MIN_SEED_BITS} random bits "
            f"(make one with: python -c 'import secrets; print(hex(secrets.randbits(128) | 1 << 127))')"
        )
    return seed


def new_seed() -> str:
    return hex(secrets.randbits(MIN_SEED_BITS) | (1 << (MIN_SEED_BITS - 1)))


def _name_id(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")


def _words(seed: int) -> list[int]:
    words = []
    while seed:
        words.append(seed & 0xFFFFFFFF)
        seed >>= 32
    return words or [0]


def seed_sequence(seed: int, name: str, block: int = 0) -> np.random.SeedSequence:
    """The seed sequence of stream ``name`` (registered in :mod:`pipeline.streams`) in block ``block``."""
    streams.check(name)
    return np.random.SeedSequence(entropy=_words(seed), spawn_key=(_name_id(name), int(block)))


def stream(seed: int, name: str, block: int = 0) -> np.random.Generator:
    """The generator for stream ``name`` in participant block ``block``."""
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, name, block)))


def block_key(seed: int, name: str, block: int = 0) -> np.uint64:
    """A 64-bit key for the Numba counter-seeded generator (``kernels.rng``)."""
    return np.uint64(seed_sequence(seed, name, block).generate_state(1, dtype=np.uint64)[0])
