"""Numba kernels: pure functions of arrays, no I/O.  Each has a slow twin in
``kernels.reference`` that the tests compare it with."""
