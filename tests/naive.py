"""Slow, obviously correct references for the fast kernels: full matrices, plain Python."""

import re
import struct

import numpy as np

from gpualign import fastq
from gpualign.bam.bai import LINEAR_SHIFT, PSEUDO_BIN
from gpualign.sam import FLAG_UNMAPPED

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
    return vote(sorted(hits), t, max_cand)


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


def naive_loci(cands, n, t, clip_penalty, unscored):
    """What each candidate of one read (length n) competes with, from its extension results.

    cands: one dict per candidate, in candidate order, with its strand (0/1), end-to-end `score`
    and `end_col`, `local_score`, `local_start_row`, `local_end_row`, `local_end_col` and `window`
    (genome position of window column 0). An end-to-end score at or below `unscored` was not
    computed. Returns one dict per candidate: eff, raw, loc, end, span, keep.

    End-to-end stands unless the local alignment beats it by more than clip_penalty per clipped
    read end (a clipped start: local_start_row > 0; a clipped end: local_end_row < n); then the
    candidate competes with the local score less those penalties. A candidate loses its locus
    (keep False) to another on its strand whose reference end is within t of its own and whose
    competing score is higher, or equal and earlier in the list.
    """
    out = []
    for c in cands:
        clipped_ends = int(c["local_start_row"] > 0) + int(c["local_end_row"] < n)
        local_eff = c["local_score"] - clip_penalty * clipped_ends
        if c["score"] > unscored and not local_eff > c["score"]:
            out.append(dict(eff=c["score"], raw=c["score"], loc=0, end=c["window"] + c["end_col"], span=n))
        else:
            out.append(dict(eff=local_eff, raw=c["local_score"], loc=1, end=c["window"] + c["local_end_col"],
                            span=c["local_end_row"] - c["local_start_row"]))
    for i, me in enumerate(out):
        rivals = [j for j, other in enumerate(out) if j != i and cands[j]["strand"] == cands[i]["strand"]
                  and abs(other["end"] - me["end"]) <= t]
        me["keep"] = not any(out[j]["eff"] > me["eff"] or (out[j]["eff"] == me["eff"] and j < i) for j in rivals)
    return out


def naive_mapq(best, second, nties, score, aligned, match, mismatch, min_score):
    """MAPQ in exact arithmetic: 0 for ties; else the lead of best over the second locus (or over
    two thirds of min_score, rounded down, when that is higher or there is no second: None) at 6
    per match score, times identity squared, rounded (up from .501), at most 60. identity counts
    each mismatch's cost in score (match + mismatch) against the aligned bases: 1 - (aligned * match -
    score) / ((match + mismatch) * aligned), 1 when nothing is aligned, never below 0."""
    from fractions import Fraction
    if nties > 1:
        return 0
    floor = 2 * min_score // 3
    sub = floor if second is None or second < floor else second
    if best <= sub:
        return 0
    identity = Fraction(1)
    if aligned > 0:
        identity = max(Fraction(0), 1 - Fraction(aligned * match - score, (match + mismatch) * aligned))
    q = Fraction(6 * (best - sub), match) * identity * identity + Fraction(499, 1000)
    return min(60, q.numerator // q.denominator)


def naive_choice(loci, keys, name_hash, unseen, match, mismatch, min_score):
    """One read's placement from its loci (naive_loci) and candidate keys: (key, local, AS, XS,
    MAPQ); (-1, 0, 0, -1, 0) when it is unmapped (no kept candidate scores min_score).

    Among the kept candidates with the best competing score, ordered by key, the one at
    name_hash % (how many) is chosen. XS: the best competing score of the other kept candidates
    (-1 if none reaches min_score). MAPQ (naive_mapq) from best and the higher of that second score
    and `unseen`, the most a locus the read's candidate search left out could score (None: none left
    out): a locus unseen is a rival as a locus seen is.
    """
    kept = [i for i, locus in enumerate(loci) if locus["keep"]]
    best = max((loci[i]["eff"] for i in kept), default=None)
    if best is None or best < min_score:
        return -1, 0, 0, -1, 0
    ties = sorted(kept, key=lambda i: keys[i])
    ties = [i for i in ties if loci[i]["eff"] == best]
    chosen = ties[int(name_hash) % len(ties)]
    second = max((loci[i]["eff"] for i in kept if i != chosen), default=None)
    xs = second if second is not None and second >= min_score else -1
    rival = second if unseen is None else unseen if second is None else max(second, unseen)
    mapq = naive_mapq(best, rival, len(ties), loci[chosen]["raw"], loci[chosen]["span"], match, mismatch, min_score)
    return keys[chosen], loci[chosen]["loc"], loci[chosen]["raw"], xs, mapq


def naive_bins(genome_codes_per_contig, k):
    """k-mer bins of a genome given as base codes 0-4 per contig (concatenated in that order): a
    dict from each k-mer's code (its bases as a base-4 number, first base most significant) to the
    ascending genome positions where it starts; k-mers holding an N or running past their contig's
    end are left out."""
    bins, start = {}, 0
    for contig in genome_codes_per_contig:
        contig = [int(c) for c in contig]
        for p in range(len(contig) - k + 1):
            kmer = contig[p:p + k]
            if 4 in kmer:
                continue
            code = 0
            for c in kmer:
                code = code * 4 + c
            bins.setdefault(code, []).append(start + p)
        start += len(contig)
    return bins


def naive_index(genome_codes_per_contig, k):
    """naive_bins laid out as the index is: (offsets, positions), the positions of code c at
    positions[offsets[c]:offsets[c + 1]], with 4**k + 1 offsets."""
    bins = naive_bins(genome_codes_per_contig, k)
    offsets, positions = [0], []
    for code in range(4 ** k):
        positions += bins.get(code, [])
        offsets.append(len(positions))
    return offsets, positions


def naive_multi_exact(count, stored_keys, name_hash, n, max_exact, match):
    """A read matching exactly at count >= 2 places (the first max_exact of them stored): the stored
    key at name_hash % (how many stored), end to end, AS = XS = n * match, MAPQ 0, as (key, local,
    AS, XS, MAPQ); None for a read with fewer than two exact matches (its placement is left as is)."""
    if count < 2:
        return None
    stored = stored_keys[:min(count, max_exact)]
    return int(stored[int(name_hash) % len(stored)]), 0, n * match, n * match, 0


def md_nm(query, ref, cigar):
    """MD string and NM of an alignment, base by base; query and ref are base codes (4 = N), ref
    from the alignment's first reference base, cigar (op, length) tuples with BAM op codes (soft
    clips included). N in the read or the reference counts as a mismatch, as it scores as one."""
    md, nm, run, qi, ri = [], 0, 0, 0, 0
    for op, ln in cigar:
        if op == 0:      # M
            for y in range(ln):
                q, r = query[qi + y], ref[ri + y]
                if q != r or q == 4 or r == 4:
                    md += [str(run), "ACGTN"[r]]
                    run, nm = 0, nm + 1
                else:
                    run += 1
            qi, ri = qi + ln, ri + ln
        elif op == 1:    # I
            qi, nm = qi + ln, nm + ln
        elif op == 2:    # D
            md += [str(run), "^" + "".join("ACGTN"[b] for b in ref[ri:ri + ln])]
            run, nm, ri = 0, nm + ln, ri + ln
        elif op == 4:    # S
            qi += ln
    md.append(str(run))
    return "".join(md), nm


# ---- .bai (bam/bai.py)


def bai_bytes(n_ref: int, tid, pos, end, bins, flag, vstart, vend) -> bytes:
    """The .bai bytes (bam.bai.build_bai), plainly: per reference, a dictionary of bins and their chunks,
    the linear index by np.minimum.at."""
    out = [b"BAI\x01", struct.pack("<i", n_ref)]
    placed = tid >= 0
    bounds = np.searchsorted(tid[placed], np.arange(n_ref + 1))
    idx = np.flatnonzero(placed)
    for ref in range(n_ref):
        rows = idx[bounds[ref]:bounds[ref + 1]]
        out.append(bai_reference(pos[rows], end[rows], bins[rows], flag[rows], vstart[rows], vend[rows]))
    out.append(struct.pack("<Q", int(np.count_nonzero(~placed))))
    return b"".join(out)


def bai_reference(pos, end, bins, flag, vstart, vend) -> bytes:
    """One reference's part of the .bai: each bin's records in order, merged into one chunk while
    each starts where the last ended; the pseudo-bin; the linear index."""
    if len(pos) == 0:
        return struct.pack("<ii", 0, 0)
    chunks = {}
    for b, s, e in zip(bins.tolist(), vstart.tolist(), vend.tolist()):
        mine = chunks.setdefault(b, [])
        if mine and mine[-1][1] == s:
            mine[-1][1] = e
        else:
            mine.append([s, e])
    out = struct.pack("<i", len(chunks) + 1)
    for b in sorted(chunks):
        out += struct.pack("<Ii", b, len(chunks[b])) + b"".join(struct.pack("<QQ", s, e) for s, e in chunks[b])
    unmapped = sum(1 for f in flag.tolist() if f & FLAG_UNMAPPED)
    out += struct.pack("<IiQQQQ", PSEUDO_BIN, 2, int(vstart[0]), int(vend[-1]), len(pos) - unmapped, unmapped)
    return out + bai_linear(pos, end, vstart)


def bai_linear(pos, end, vstart) -> bytes:
    """Per 16 kbp window, the smallest start offset of a record overlapping it; empty windows
    take the previous window's value (records are in coordinate order, so offsets ascend)."""
    w0 = pos >> LINEAR_SHIFT
    w1 = (np.maximum(end, pos + 1) - 1) >> LINEAR_SHIFT
    n = int(w1.max()) + 1
    offsets = np.full(n, np.iinfo(np.uint64).max, dtype=np.uint64)
    span = w1 - w0 + 1
    windows = np.repeat(w0, span) + (np.arange(span.sum()) - np.repeat(np.cumsum(span) - span, span))
    np.minimum.at(offsets, windows, np.repeat(vstart, span))
    unset = offsets == np.iinfo(np.uint64).max
    offsets[unset] = 0
    filled = np.maximum.accumulate(np.where(unset, 0, offsets))   # previous value for empty windows
    offsets = np.where(unset, filled, offsets)
    return struct.pack("<i", n) + offsets.astype("<u8").tobytes()


def parse_fasta_lines(path: str):
    """(name, masked sequence) of each contig, or the InputError's message: a line at a time, each line
    stripped of surrounding whitespace, as reference.parse_fasta reads a FASTA."""
    import gzip
    from gpualign.reference import _LETTERS, _TO_MASKED
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    with (gzip.open if gz else open)(path, "rb") as fh:
        lines = fh.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out, name, seq, seen, header = [], None, [], set(), 0
    for lineno, line in enumerate(lines, 1):
        line = line[:-1] if line.endswith(b"\r") else line
        if line.startswith(b">"):
            if name is not None:
                if not b"".join(seq):
                    return f"reference {path} line {header}: contig {name!r} has no sequence"
                out.append((name, b"".join(seq).translate(_TO_MASKED)))
            words = line[1:].split()
            if not words:
                return f"reference {path} line {lineno}: header with no contig name"
            name = words[0].decode("ascii", errors="replace")
            if name in seen:
                return f"reference {path} line {lineno}: duplicate contig name {name!r}"
            seen.add(name)
            header, seq = lineno, []
        elif name is None:
            if line.strip():
                return f"reference {path} line {lineno}: sequence before the first '>' header (not a FASTA file?)"
        else:
            bad = line.strip().translate(None, _LETTERS)
            if bad:
                return f"reference {path} line {lineno}: invalid character {bad[:1].decode()!r} in sequence"
            seq.append(line.strip())
    if name is None:
        return f"reference {path}: empty file"
    if not b"".join(seq):
        return f"reference {path} line {header}: contig {name!r} has no sequence"
    out.append((name, b"".join(seq).translate(_TO_MASKED)))
    return out


def naive_unseen_score(dropped, best_votes, exact_count, n, k, match, edit_cost):
    """The best score a locus left out of a read's search can have, by brute force: the seed windows
    (seed.seed_offset's: 0, k, 2k, ..., the last moved back to end at n) that the best candidate's
    votes stand for (at most all of them), the left-out locus sharing `dropped` of them; of every
    choice of the windows it lacks, the fewest edits that put one in each (an edit at a position
    covers the windows holding it), each costing edit_cost. None unless a locus that well supported
    was left out (dropped > 0, 2 * dropped >= best_votes, no exact hit)."""
    from itertools import combinations, product
    if not (dropped > 0 and 2 * dropped >= best_votes and exact_count == 0):
        return None
    seeds = (n + k - 1) // k
    windows = [(min(s * k, n - k), min(s * k, n - k) + k) for s in range(seeds)]
    missing = min(best_votes, seeds) - dropped
    if missing <= 0:
        return n * match
    fewest = None
    for lacked in combinations(windows, missing):
        # fewest positions hitting every lacked window: try covers of growing size
        spots = sorted({x for a, b in lacked for x in range(a, b)})
        for size in range(1, missing + 1):
            if any(all(any(a <= x < b for x in cover) for a, b in lacked)
                   for cover in combinations(spots, size)):
                break
        fewest = size if fewest is None else min(fewest, size)
    return n * match - fewest * edit_cost


def picard_location(name):
    """(tile, x, y) from a read name as Picard's default READ_NAME_REGEX reads it (5 or 7 ':' fields,
    the last three starting with digits), else (-1, -1, -1)."""
    fields = name.split(":")
    digits = [re.match(r"-?\d+", f) for f in fields[-3:]]
    if len(fields) not in (5, 7) or not all(digits) or name.startswith(":"):
        return (-1, -1, -1)
    tile, x, y = (int(m.group()) for m in digits)
    return (tile, x, y) if tile >= 0 and 0 <= x < 1 << 24 and 0 <= y < 1 << 24 else (-1, -1, -1)


def naive_duplicates(records, libraries=None):
    """The records (pysam, in file order) that duplicate marking flags, as (name, is_read1) pairs:
    Picard MarkDuplicates' rules written out plainly. libraries: read group ID -> LB (None: one
    library). Pairs (both mates mapped, primary) group by library and their two (contig, unclipped
    5' position, strand) ends; the highest summed score (base qualities >= 15, each read's capped at
    16383) is kept, ties (Picard's comparator) to the lowest (tile, x, y) of the name, then to the
    pair whose read 1 end (the mate with the lower unclipped 5' end; on equal ends the one first in
    the file) comes first; the others are flagged, both mates. Fragments (single reads, reads whose
    mate is unmapped) group by library and end with the pairs' mapped reads: a group with a pair's
    read flags every fragment in it, else the best fragment (ties: the lowest place, then the first
    in the file) is kept. Unmapped, secondary and supplementary records are never flagged."""
    def lib(r):
        rg = r.get_tag("RG") if r.has_tag("RG") else None
        return (libraries or {}).get(rg, "Unknown Library")

    def five(r):
        ops = r.cigartuples
        if r.is_reverse:
            clip = ops[-1][1] if ops[-1][0] in (4, 5) else 0
            return r.reference_id, r.reference_end - 1 + clip, True
        clip = ops[0][1] if ops[0][0] in (4, 5) else 0
        return r.reference_id, r.reference_start - clip, False

    def score(r):
        return min(sum(q for q in r.query_qualities if q >= 15), 16383)

    used = [(i, r) for i, r in enumerate(records)
            if not (r.is_unmapped or r.is_secondary or r.is_supplementary)]
    mates = {}
    for i, r in used:
        if r.is_paired and not r.mate_is_unmapped:
            mates.setdefault(r.query_name, []).append((i, r))
    flagged = set()
    pair_sets = {}
    for name, both in mates.items():
        assert len(both) == 2, name
        (i, a), (j, b) = both   # i < j: a is first in the file
        read1 = j if five(b)[:2] < five(a)[:2] else i
        key = (lib(a), tuple(sorted([five(a), five(b)])))
        pair_sets.setdefault(key, []).append((-(score(a) + score(b)), picard_location(name), read1, name))
    for members in pair_sets.values():
        members.sort()
        for *_, name in members[1:]:
            flagged |= {(name, True), (name, False)}
    frag_sets = {}
    for i, r in used:
        in_pair = r.is_paired and not r.mate_is_unmapped
        frag_sets.setdefault((lib(r),) + five(r), []).append((in_pair, -score(r), picard_location(r.query_name), i, r))
    for members in frag_sets.values():
        frags = sorted((m for m in members if not m[0]), key=lambda m: m[:4])
        keep = 0 if len(frags) == len(members) else None
        for x, (*_, r) in enumerate(frags):
            if x != keep:
                flagged.add((r.query_name, r.is_read1))
    return flagged


def vote(hits, t, max_cand):
    """Clusters of sorted hits: runs within t of their first hit, ranked by votes then key (the
    median hit); the best max_cand as [(key, votes)], and the votes of the best left out (0 if none)."""
    clusters, i = [], 0
    while i < len(hits):
        j = i + 1
        while j < len(hits) and hits[j] - hits[i] <= t:
            j += 1
        clusters.append((hits[(i + j - 1) // 2], j - i))
        i = j
    clusters.sort(key=lambda c: (-c[1], c[0]))
    return clusters[:max_cand], (clusters[max_cand][1] if len(clusters) > max_cand else 0)


def naive_bam_summary(bam: str, mapq_cutoff: int = 20) -> dict:
    """gpualign.bam.stats.summarize's counts, record by record in Python (what it did before
    samtools' passes): records, primary (neither secondary nor supplementary), mapped primary,
    their share in percent, and mapped primary records with MAPQ >= mapq_cutoff."""
    import pysam
    records = primary = mapped = confident = 0
    with pysam.AlignmentFile(bam, "rb", check_sq=False) as fh:
        for rec in fh.fetch(until_eof=True):
            records += 1
            if rec.is_secondary or rec.is_supplementary:
                continue
            primary += 1
            if not rec.is_unmapped:
                mapped += 1
                confident += rec.mapping_quality >= mapq_cutoff
    pct = round(100.0 * mapped / primary, 2) if primary else 0.0
    return {"records": records, "primary": primary, "mapped": mapped, "mapped_pct": pct, "mapq_ge_20": confident}


def regrouped_by_sort(cand, new_read, new_key, new_ext):
    """mapper.with_rescued's reference (pairing.regroup_rescued): all rows stably sorted by read."""
    from gpualign.mapper import Candidates
    reads = np.concatenate((cand.read, new_read))
    order = np.argsort(reads, kind="stable")
    start = np.zeros_like(cand.start)
    start[1:] = np.cumsum(np.bincount(reads, minlength=len(cand.start) - 1))
    return Candidates(reads[order], np.concatenate((cand.key, new_key))[order], start,
                      np.concatenate((cand.ext, new_ext))[order])


def parse_fastq(text: bytes):
    """fastq.parse_records' reference: (name, bases, qualities) of each record by splitting lines, or the code
    of the first failure (fastq.BAD_*)."""
    lines = [ln[:-1] if ln.endswith(b"\r") else ln for ln in text.split(b"\n")[:-1]]
    out = []
    for r in range(len(lines) // 4):
        h, s, p, q = lines[4 * r:4 * r + 4]
        if len(h) < 2 or h[:1] != b"@" or h[1:2] in b" \t\r\n\x0b\x0c":
            return fastq.BAD_HEADER
        if not p.startswith(b"+"):
            return fastq.BAD_PLUS
        if len(s) != len(q):
            return fastq.BAD_LENGTHS
        if any(not fastq.SEQ_OK[c] for c in s):
            return fastq.BAD_BASE
        if any(c < 33 or c > 126 for c in q):
            return fastq.BAD_QUAL
        out.append((h[1:].split()[0], s, q))
    return out
