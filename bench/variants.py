#!/usr/bin/env python3
"""One `gpualign map` run with the mapper's tuning constants overridden, timed and scored.

    python3 bench/variants.py IN_FLIGHT RESEED_CHUNK RESEED_HITS N_READS -- MAP ARGS... -o OUT.bam

IN_FLIGHT sets the CUDA backend's BATCHES_IN_FLIGHT and RESEED_CHUNK its RESEED_CHUNK (launch
configuration, read by the host at each batch), RESEED_HITS the mapping's Tuning.reseed_hits (0: no
re-seeding), passed in through cli.main. Reads must be named as simulate.py
names them (N_READS: how many the FASTQ holds, so missing ones count); prints one line: the variant, wall seconds inside the process, and the score.
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib as bl  # noqa: E402
from gpualign.backends import cuda  # noqa: E402
from gpualign.cli import main  # noqa: E402
from gpualign.options import Tuning  # noqa: E402


def set_launch(in_flight: int, chunk: int) -> None:
    cuda.BATCHES_IN_FLIGHT, cuda.RESEED_CHUNK = in_flight, chunk


if __name__ == "__main__":
    in_flight, chunk, hits, n_reads = (int(v) for v in sys.argv[1:5])
    map_args = sys.argv[sys.argv.index("--") + 1:]
    set_launch(in_flight, chunk)
    start = time.time()
    rc = main(["map"] + map_args, tuning=Tuning(reseed_hits=hits))
    wall = time.time() - start
    bam = map_args[map_args.index("-o") + 1]
    score = bl.score_bams({"variant": bam}, n_reads, 16)
    print(f"variant in_flight={in_flight} reseed_chunk={chunk} reseed_hits={hits}: {wall:.1f} s, rc {rc}, {score}",
          file=sys.stderr)
