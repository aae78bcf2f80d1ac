"""Counter-based random numbers (splitmix64) for synth.py and simulate.py: one stream per
(seed, item), so an item (a genome chunk, a repeat copy, a read) draws the same numbers whatever
the thread count or batch size.

The functions are inlined into their callers' numba kernels, which are cached (cache=True) per
file: after changing this file, clear the callers' caches (bench/__pycache__, or NUMBA_CACHE_DIR).
"""
from __future__ import annotations

import numpy as np
from numba import njit

INV_2_32 = 1.0 / 4294967296.0


@njit(inline="always", cache=True)
def mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(inline="always", cache=True)
def stream(seed, item):
    """Start state of the stream for one item."""
    return mix(np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + mix(np.uint64(item) + np.uint64(1)))


@njit(inline="always", cache=True)
def next_draw(state):
    """(next state, a 64-bit draw)."""
    state = state + np.uint64(0x9E3779B97F4A7C15)
    return state, mix(state)


@njit(inline="always", cache=True)
def unit(r):
    """Uniform float in [0, 1) from a 64-bit draw."""
    return (r >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(inline="always", cache=True)
def below(r, n):
    """Integer in [0, n) from a 64-bit draw (n < 2**32; bias negligible)."""
    return np.int64(((r >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32))
