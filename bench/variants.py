#!/usr/bin/env python3
"""One `gpualign map` run with the mapper's tuning constants overridden, timed and scored.

    python3 bench/variants.py IN_FLIGHT RESEED_CHUNK RESEED_HITS N_READS -- MAP ARGS... -o OUT.bam

IN_FLIGHT sets gpualign.cuda.BATCHES_IN_FLIGHT, RESEED_CHUNK gpualign.cuda.RESEED_CHUNK and
RESEED_HITS gpualign.mapper.RESEED_HITS (0: no re-seeding). Reads must be named as synth.py
names them (N_READS: how many the FASTQ holds, so missing ones count); prints one line: the variant, wall seconds inside the process, and the score.
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib as bl  # noqa: E402
from gpualign import cuda, mapper  # noqa: E402
from gpualign.cli import main  # noqa: E402


def set_variant(in_flight: int, chunk: int, hits: int) -> None:
    cuda.BATCHES_IN_FLIGHT, cuda.RESEED_CHUNK = in_flight, chunk
    if hits == 0:
        mapper.reseed_incomplete = lambda batch, need, counts, index, p, backend, *first: first
    else:
        mapper.RESEED_HITS = hits


if __name__ == "__main__":
    in_flight, chunk, hits, n_reads = (int(v) for v in sys.argv[1:5])
    map_args = sys.argv[sys.argv.index("--") + 1:]
    set_variant(in_flight, chunk, hits)
    start = time.time()
    rc = main(["map"] + map_args)
    wall = time.time() - start
    bam = map_args[map_args.index("-o") + 1]
    score = bl.score_bams({"variant": bam}, n_reads, 16)
    print(f"variant in_flight={in_flight} reseed_chunk={chunk} reseed_hits={hits}: {wall:.1f} s, rc {rc}, {score}",
          file=sys.stderr)
