"""Optical duplicates (markdup.py's READ_PAIR_OPTICAL_DUPLICATES), after Picard MarkDuplicates.

A read's place on the flow cell comes from its name as Picard's default READ_NAME_REGEX takes it:
the name has 5 or 7 ':'-separated fields (Illumina's old and new layouts) and the last three start
with integers (an optional '-', then digits up to the first non-digit: "197393/1" is 197393):
tile, x, y. Names that do not parse are never optical duplicates. A location is packed into one
int64 (read_location): the tile's low 16 bits (Picard keeps it as a short) << 48 | x << 24 | y;
-1: none. x and y must be 0 to 2^24 - 1 here; Picard also takes negative or larger values
(and keeps x and y as shorts in MarkDuplicates, so it wraps values over 32767): no Illumina
instrument writes those.

Within a set of duplicate pairs (Picard's trackOpticalDuplicates), pairs are optical duplicates of
each other when they share the read group and the tile and lie within the pixel distance in both x
and y; chains of such pairs join (union-find, as Picard's graph), and each cluster of k pairs counts
k - 1 optical duplicates. Where a set holds both FR and RF pairs (read 1 forward, read 2 reverse,
and the other way round), the two are clustered apart, as Picard does. Only pairs are counted:
Picard does not look for optical duplicates among single reads.
"""

import numpy as np
from numba import njit

from ..jitcache import use_versioned_cache

use_versioned_cache()  # before any @njit below

NO_LOCATION = -1
TILE_SHIFT, X_SHIFT = 48, 24
COORD_LIMIT = 1 << 24
FR, RF, OTHER = 0, 1, 2   # pair orientations as optical duplicates see them (read 1's strand first)


@njit(cache=True, nogil=True)
def leading_int(name, start, end):
    """Picard's rapidParseInt over name[start:end]: (value, ok); ok is False without a digit."""
    i, sign, value, digits = start, 1, 0, 0
    if i < end and name[i] == 45:   # '-'
        sign, i = -1, i + 1
    while i < end and 48 <= name[i] <= 57 and digits < 12:
        value = value * 10 + (name[i] - 48)
        digits += 1
        i += 1
    return sign * value, digits > 0


@njit(cache=True, nogil=True)
def read_location(name, start, end):
    """The packed tile/x/y of the read named name[start:end] (no trailing NUL), or NO_LOCATION."""
    fields, k, stop = 0, 2, end
    values = np.empty(3, dtype=np.int64)
    for i in range(end - 1, start - 1, -1):
        if name[i] == 58 or i == start:   # ':' or the name's first byte ends a field
            fields += 1
            if k >= 0:
                # Picard parses the first field from the name's start, a leading ':' included (and fails)
                value, ok = leading_int(name, start if i == start else i + 1, stop)
                if not ok:
                    return NO_LOCATION
                values[k] = value
                k -= 1
                stop = i
    if fields != 5 and fields != 7:
        return NO_LOCATION
    tile, x, y = values[0], values[1], values[2]
    if tile < 0 or not (0 <= x < COORD_LIMIT and 0 <= y < COORD_LIMIT):
        return NO_LOCATION
    return ((tile & 0xFFFF) << TILE_SHIFT) | (x << X_SHIFT) | y


@njit(cache=True, nogil=True)
def name_locations(names, name_off, first, last):
    """read_location of reads first..last-1 (names concatenated, read r's at name_off[r]..)."""
    out = np.empty(last - first, dtype=np.int64)
    for r in range(first, last):
        out[r - first] = read_location(names, name_off[r], name_off[r + 1])
    return out


@njit(cache=True, nogil=True)
def close_enough(a, b, distance):
    """Same tile and within distance in x and y (the read group is compared by the caller)."""
    if a < 0 or b < 0 or (a >> TILE_SHIFT) != (b >> TILE_SHIFT):
        return False
    mask = COORD_LIMIT - 1
    return (abs(((a >> X_SHIFT) & mask) - ((b >> X_SHIFT) & mask)) <= distance
            and abs((a & mask) - (b & mask)) <= distance)


@njit(cache=True, nogil=True)
def root(parent, i):
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


@njit(cache=True, nogil=True)
def optical_in_sets(set_start, loc, rg, orient, distance):
    """Which members of the duplicate sets are counted as optical duplicates. Members are rows
    0..n-1 in set order (set s is rows set_start[s]..set_start[s+1]-1, its kept pair first);
    loc: packed locations; rg: read group numbers; orient: FR, RF or OTHER. In each cluster the
    kept pair, or else the member first in the set, is the one not counted."""
    n = loc.shape[0]
    optical = np.zeros(n, dtype=np.bool_)
    parent = np.arange(n)
    for s in range(set_start.shape[0] - 1):
        a, b = set_start[s], set_start[s + 1]
        if b - a < 2:
            continue
        has_fr = has_rf = False
        for i in range(a, b):
            has_fr |= orient[i] == FR
            has_rf |= orient[i] == RF
        split = has_fr and has_rf
        for i in range(a, b):
            for j in range(i + 1, b):
                if split and orient[i] != orient[j]:
                    continue
                if rg[i] == rg[j] and close_enough(loc[i], loc[j], distance):
                    ri, rj = root(parent, i), root(parent, j)
                    if ri != rj:   # the lower row roots the cluster: the kept pair if it is in it
                        parent[max(ri, rj)] = min(ri, rj)
        for i in range(a, b):
            optical[i] = root(parent, i) != i
    return optical
