"""The Numba deflate kernels: valid streams (zlib inflates them back), the same
bytes in every process, and compression close to zlib's on MRI pixels."""
from __future__ import annotations

import multiprocessing
import zlib
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from kernels.deflate import MIN_RUN, deflate_runs


def _inflate(stream) -> bytes:
    return zlib.decompress(np.asarray(stream).tobytes(), -15)


def _cases():
    rng = np.random.default_rng(7)
    noise = np.clip(rng.normal(90, 25, 200_000), 0, 255).astype(np.uint8)
    t1 = np.full(50_000, np.nan, dtype=np.float32)
    t1[::7] = rng.normal(1000, 100, t1[::7].size)
    return {
        "empty": np.zeros(0, np.uint8),
        "one byte": np.array([42], np.uint8),
        "uniform random (stored blocks)": rng.integers(0, 256, 150_000).astype(np.uint8),
        "gaussian noise": noise,
        "constant": np.full(100_000, 3, np.uint8),
        "float32 NaN background": t1.view(np.uint8),
        "runs at the block edge": np.repeat(np.arange(40, dtype=np.uint8), 4097),
        "short repeats below the minimum run": np.tile(np.arange(MIN_RUN - 1, dtype=np.uint8), 5000),
    }


@pytest.mark.parametrize("block_size", [1, 4096, 65535])
@pytest.mark.parametrize("name", list(_cases()))
def test_deflate_runs_round_trips(name, block_size):
    data = _cases()[name]
    if block_size == 1 and data.size > 5000:
        data = data[:5000]
    assert _inflate(deflate_runs(data, block_size)) == data.tobytes()


def test_deflate_runs_compresses_noise_like_zlib():
    data = _cases()["gaussian noise"]
    ours = deflate_runs(data, 65535).size
    # Entropy coding only: within 3 % of zlib level 6 on Gaussian noise.
    assert ours <= 1.03 * len(zlib.compress(data.tobytes(), 6))
    nan = _cases()["float32 NaN background"]
    assert deflate_runs(nan, 65535).size < 0.5 * nan.size


def _digest(seed):
    import hashlib

    rng = np.random.default_rng(seed)
    data = np.clip(rng.normal(90, 25, 300_000), 0, 255).astype(np.uint8)
    return hashlib.sha256(deflate_runs(data, 65535).tobytes()).hexdigest()


def test_deflate_runs_is_the_same_in_every_process():
    here = [_digest(s) for s in range(4)]
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        assert list(pool.map(_digest, range(4))) == here
