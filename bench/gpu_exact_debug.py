"""Repeat the exact-match backend test on fresh random inputs and print the first disagreement
with the naive reference (for chasing a rare GPU-only failure)."""
import sys

import numpy as np

sys.path.insert(0, "tests")
from gpualign import core, cpu, cuda, cuda_config  # noqa: E402
from gpualign.index import build_index  # noqa: E402
from gpualign.params import MapParams  # noqa: E402
from gpualign.reads import encode_reads  # noqa: E402
import naive  # noqa: E402
from helpers import random_genome  # noqa: E402

P = MapParams(max_indels=3, max_candidates=4, max_hits=256)
cuda_config.THREADS_PER_BLOCK = 4
for seed in range(int(sys.argv[1])):
    rng = np.random.default_rng(seed)
    genome, seqs = random_genome(rng, lengths=(1500, 700), repeat=120)
    index = build_index(genome, k=8, max_occ=50)
    text = "".join(seqs)
    names, reads, quals = [], [], []
    for i in range(12):
        p = int(rng.integers(0, len(text) - 40))
        r = text[p:p + int(rng.integers(20, 40))]
        if i % 3 == 0:
            r = r[:10] + ("A" if r[10] != "A" else "C") + r[11:]
        names.append(f"r{i}".encode())
        reads.append(r.encode())
        quals.append(b"I" * len(r))
    reads.append(seqs[0][:30].encode())
    names.append(b"rep")
    quals.append(b"I" * 30)
    batch = encode_reads(names, reads, quals, 8)
    results = {be.NAME: be.exact_stage(batch, genome, index, P) for be in (cpu, cuda)}
    gcodes = genome.codes()
    bounds = list(zip(genome.offsets.tolist(), genome.ends.tolist()))
    for r in range(len(batch)):
        s, e = batch.read_off[r], batch.read_off[r + 1]
        want = [core.DIAG_BIAS + p for p in naive.exact_occurrences(gcodes, bounds, batch.codes[s:e])]
        want += [core.STRAND_BIT + core.DIAG_BIAS + p for p in naive.exact_occurrences(gcodes, bounds, batch.rc_codes[s:e])]
        for name, (counts, keys) in results.items():
            got = keys[r, :min(counts[r], P.max_exact)].tolist()
            if counts[r] != len(want) or got != want[:P.max_exact]:
                print(f"seed {seed} read {r} {name}: count {counts[r]} want {len(want)}; got {got} want {want}; "
                      f"read {reads[r].decode()} hbin {batch.hbin[r]} {batch.rc_hbin[r]}")
print("done", sys.argv[1], "seeds")
