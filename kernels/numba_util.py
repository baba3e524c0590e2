"""One place for Numba defaults.

Kernels are compiled on first use and cached on disk (``cache=True``) so that a
second build in a fresh process does not pay compilation again.  Import kernels
inside the function that needs them: compilation then waits for first use.
"""
from __future__ import annotations

import numba

DEFAULTS = dict(nogil=True, cache=True, fastmath=False, error_model="numpy")


def njit(*args, **kwargs):
    opts = dict(DEFAULTS)
    opts.update(kwargs)
    if args and callable(args[0]):
        return numba.njit(**opts)(args[0])
    return numba.njit(*args, **opts)
