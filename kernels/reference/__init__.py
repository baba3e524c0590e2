"""Slow, obvious pure-Python twins of the Numba kernels, for tests only."""
