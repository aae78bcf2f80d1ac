#!/usr/bin/env python3
"""A human-size reference for capacity and speed runs: real chromosomes, then uniform random filler.

    python3 bench/human_ref.py REAL.fa[.gz] [REAL2 ...] --total 3100000000 [--contig 100000000] [--seed 7] -o OUT.fa

The real FASTA files are copied first (their contigs and names as they are); contigs named
``filler_1``, ``filler_2``, ... of ``--contig`` bases of uniform random A/C/G/T (numpy, ``--seed``)
follow until the reference holds ``--total`` bases (the last one shorter). The filler has no
repeats, so it measures memory, index build, start-up and reads/s at human scale; accuracy in
human repeats is measured on the real chromosomes (reads simulated from them alone).
"""
import argparse
import gzip
import sys

import numpy as np

LINE = 60


def real_bases(path: str, out) -> int:
    """Copy a FASTA (plain or gzip) to out; returns its bases."""
    opener = gzip.open if path.endswith(".gz") else open
    bases = 0
    with opener(path, "rb") as fh:
        for line in fh:
            if not line.startswith(b">"):
                bases += len(line.strip())
            out.write(line if line.endswith(b"\n") else line + b"\n")
    return bases


def write_filler(out, name: str, length: int, rng):
    out.write(f">{name} uniform random filler\n".encode())
    codes = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, size=length, dtype=np.uint8)]
    full = length // LINE * LINE
    lines = np.empty((full // LINE, LINE + 1), dtype=np.uint8)
    lines[:, :LINE] = codes[:full].reshape(-1, LINE)
    lines[:, LINE] = 10
    out.write(lines.tobytes())
    if length > full:
        out.write(codes[full:].tobytes() + b"\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("real", nargs="+")
    ap.add_argument("--total", type=int, default=3_100_000_000)
    ap.add_argument("--contig", type=int, default=100_000_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    with open(args.output, "wb") as out:
        bases = sum(real_bases(path, out) for path in args.real)
        real = bases
        number = 0
        while bases < args.total:
            number += 1
            length = min(args.contig, args.total - bases)
            write_filler(out, f"filler_{number}", length, rng)
            bases += length
    print(f"{args.output}: {real} bp of real sequence, {number} filler contigs, {bases} bp in all", file=sys.stderr)


if __name__ == "__main__":
    main()
