"""Compare the alignment records of two BAM/SAM files (headers' @PG lines aside).

Usage: python bench/compare_bams.py A.bam B.bam
Prints how many records are identical; exits 1 and shows the first differences otherwise.
Records are compared in file order (both unsorted in input order, or both coordinate-sorted).
"""

import sys

import pysam


def records(path):
    with pysam.AlignmentFile(path, check_sq=False) as fh:
        return [r.to_string() for r in fh]


def main(argv):
    a, b = records(argv[0]), records(argv[1])
    same = sum(x == y for x, y in zip(a, b))
    print(f"{argv[0]}: {len(a)} records; {argv[1]}: {len(b)} records; identical: {same}")
    if len(a) != len(b) or same != len(a):
        shown = 0
        for x, y in zip(a, b):
            if x != y and shown < 5:
                print("  A:", x[:200], "\n  B:", y[:200])
                shown += 1
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
