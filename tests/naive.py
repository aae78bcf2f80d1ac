"""Slow, obviously correct references for the fast kernels: full matrices, plain Python."""

NEG = float("-inf")


def score_pair(a, b, match, mismatch):
    return match if (a == b and a < 4) else -mismatch


def banded_align(q, ref, c0, t, local, match, mismatch, gap_open, gap_ext):
    """Gotoh alignment of the whole read q against ref with full (n+1) x (m+1) matrices,
    cells outside the band j - i in [c0 - t, c0 + t] forbidden. Returns (score, end_i, end_j, start_i)
    with the same tie rules as the kernel: diagonal before deletion before insertion,
    first maximum in row-major order (local) or smallest end column (semi-global)."""
    n, m = len(q), len(ref)
    lo, hi = c0 - t, c0 + t
    H = [[NEG] * (m + 1) for _ in range(n + 1)]
    E = [[NEG] * (m + 1) for _ in range(n + 1)]
    F = [[NEG] * (m + 1) for _ in range(n + 1)]
    S = [[0] * (m + 1) for _ in range(n + 1)]   # read start of the best path into H
    SE = [[0] * (m + 1) for _ in range(n + 1)]
    SF = [[0] * (m + 1) for _ in range(n + 1)]
    inband = lambda i, j: lo <= j - i <= hi and 0 <= j <= m  # noqa: E731
    for j in range(m + 1):
        if inband(0, j):
            H[0][j] = 0
    best, bi, bj, bs = NEG, 0, 0, 0
    for i in range(1, n + 1):
        for j in range(0, m + 1):
            if not inband(i, j):
                continue
            if j == 0:
                H[i][j] = 0 if local else -(gap_open + gap_ext * i)
                S[i][j] = i
                continue
            if E[i][j - 1] - gap_ext > H[i][j - 1] - gap_open - gap_ext:
                E[i][j], SE[i][j] = E[i][j - 1] - gap_ext, SE[i][j - 1]
            else:
                E[i][j], SE[i][j] = H[i][j - 1] - gap_open - gap_ext, S[i][j - 1]
            if F[i - 1][j] - gap_ext > H[i - 1][j] - gap_open - gap_ext:
                F[i][j], SF[i][j] = F[i - 1][j] - gap_ext, SF[i - 1][j]
            else:
                F[i][j], SF[i][j] = H[i - 1][j] - gap_open - gap_ext, S[i - 1][j]
            h, s = H[i - 1][j - 1] + score_pair(q[i - 1], ref[j - 1], match, mismatch), S[i - 1][j - 1]
            if E[i][j] > h:
                h, s = E[i][j], SE[i][j]
            if F[i][j] > h:
                h, s = F[i][j], SF[i][j]
            if local and h <= 0:
                h, s = 0, i
            H[i][j], S[i][j] = h, s
            if local and h > best:
                best, bi, bj, bs = h, i, j, s
    if not local:
        for j in range(1, m + 1):
            if inband(n, j) and H[n][j] > best:
                best, bi, bj, bs = H[n][j], n, j, 0
    return best, bi, bj, bs


def cigar_score(q, ref, qs, rs, cigar, match, mismatch, gap_open, gap_ext):
    """Score of an alignment given as CIGAR (M/I/D) from read base qs and reference base rs."""
    score, i, j = 0, qs, rs
    for op, ln in cigar:
        if op == 0:
            for x in range(ln):
                score += score_pair(q[i + x], ref[j + x], match, mismatch)
            i, j = i + ln, j + ln
        elif op == 1:
            score -= gap_open + gap_ext * ln
            i += ln
        elif op == 2:
            score -= gap_open + gap_ext * ln
            j += ln
    return score, i, j


def exact_occurrences(genome_codes, contig_bounds, read):
    """Every position where the read equals the genome without N and inside one contig."""
    n, hits = len(read), []
    for start, end in contig_bounds:
        for p in range(start, end - n + 1):
            window = genome_codes[p:p + n]
            if all(int(a) == int(b) and a < 4 for a, b in zip(window, read)):
                hits.append(p)
    return hits


def candidates(q_fwd, q_rc, k, offsets, positions, max_occ, t, max_hits, max_cand,
               strand_bit, diag_bias):
    """Seed voting with Python lists: rarest disjoint k-mer seeds first within a hit budget per
    strand, hits sorted, runs within t of their first hit clustered, clusters ranked by votes
    (then key). Returns [(key, votes)] and the votes of the best cluster left out (0 if none)."""
    hits = []
    for strand, q in ((0, list(q_fwd)), (1, list(q_rc))):
        n = len(q)
        budget = max_hits // 2 if strand == 0 else max_hits - len(hits)
        seeds = []
        for s in range((n + k - 1) // k if n >= k else 0):
            o = min(s * k, n - k)
            kmer = q[o:o + k]
            if any(c > 3 for c in kmer):
                continue
            code = 0
            for c in kmer:
                code = code * 4 + int(c)
            count = int(offsets[code + 1] - offsets[code])
            if 0 < count <= max_occ:
                seeds.append((count, s, o, code))
        used = 0
        for count, _, o, code in sorted(seeds):
            if used + count > budget:
                break
            hits += [strand * strand_bit + int(p) - o + diag_bias for p in positions[offsets[code]:offsets[code + 1]]]
            used += count
    hits.sort()
    clusters, i = [], 0
    while i < len(hits):
        j = i + 1
        while j < len(hits) and hits[j] - hits[i] <= t:
            j += 1
        clusters.append((hits[(i + j - 1) // 2], j - i))
        i = j
    clusters.sort(key=lambda c: (-c[1], c[0]))
    dropped = clusters[max_cand][1] if len(clusters) > max_cand else 0
    return clusters[:max_cand], dropped


def local_best(q, ref, match, mismatch, gap_open, gap_ext):
    """Unbanded Smith-Waterman with full matrices: (best score, its row, its column), the first
    maximum scanning columns left to right and rows top to bottom (the rescue kernel's order)."""
    n, m = len(q), len(ref)
    H = [[0] * (m + 1) for _ in range(n + 1)]
    E = [[NEG] * (m + 1) for _ in range(n + 1)]
    F = [[NEG] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            E[i][j] = max(E[i][j - 1] - gap_ext, H[i][j - 1] - gap_open - gap_ext)
            F[i][j] = max(F[i - 1][j] - gap_ext, H[i - 1][j] - gap_open - gap_ext)
            H[i][j] = max(0, E[i][j], F[i][j], H[i - 1][j - 1] + score_pair(q[i - 1], ref[j - 1], match, mismatch))
    best, bi, bj = 0, 0, 0
    for j in range(1, m + 1):
        for i in range(1, n + 1):
            if H[i][j] > best:
                best, bi, bj = H[i][j], i, j
    return best, bi, bj


def bam_tags_of_comment(comment: str):
    """BAM bytes of a SAM-tag comment (tab-separated TAG:TYPE:VALUE, types Z A i H), or None if a
    field is not one of those: the slow, obvious reading of the SAM spec's binary tag layout."""
    import re
    import struct
    out = b""
    for field in comment.split("\t"):
        if field == "":
            continue
        m = re.fullmatch(r"([A-Za-z][A-Za-z0-9]):([ZAiH]):(.*)", field, re.S)
        if not m:
            return None
        tag, kind, value = m.groups()
        if kind == "Z" and all(" " <= c <= "~" for c in value):
            out += tag.encode() + b"Z" + value.encode() + b"\0"
        elif kind == "A" and len(value) == 1 and "!" <= value <= "~":
            out += tag.encode() + b"A" + value.encode()
        elif kind == "H" and re.fullmatch(r"([0-9A-Fa-f]{2})*", value):
            out += tag.encode() + b"H" + value.encode() + b"\0"
        elif kind == "i" and re.fullmatch(r"[+-]?[0-9]{1,10}", value) and -2**31 <= int(value) < 2**31:
            out += tag.encode() + b"i" + struct.pack("<i", int(value))
        else:
            return None
    return out
