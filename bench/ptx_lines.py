"""A kernel's PTX instructions counted by source line, and its index wrap-arounds, from PTX that
bench/ptx_check.py dumped with line information (GPUALIGN_LINEINFO=1 PTX_DUMP=FOLDER): what a change
to a kernel's source compiles to, without a GPU. A static count: a loop's line counts once (or once
a copy where the compiler unrolled it), however often it runs.

    python bench/ptx_lines.py FOLDER/_seed_shared_kernel.ptx [OTHER.ptx] [--file seed_block.py]

Prints, for each line of the source file named, the instructions of the first PTX (and of the
second, to compare two versions: the source shown is the second's), then the totals and a count of
numba's signed-index wrap-arounds: the instructions of their pattern (an `and` with the sign bit for
a shared array, a 63-bit arithmetic shift for the others), so a sign shift of other arithmetic (a
signed division by a power of two) counts too.
"""

import argparse
import collections
import re

WRAPS = re.compile(r"and\.b64.*-9223372036854775808|shr\.s64.*, 63;")


def per_line(path):
    """{(source file name, line): instructions}, the file paths, and the wrap-arounds."""
    text = open(path).read()
    files = {m.group(1): m.group(2) for m in re.finditer(r'\.file\s+(\d+)\s+"([^"]+)"', text)}
    counts, here, wraps = collections.Counter(), None, 0
    for line in text.split("\n"):
        s = line.strip()
        m = re.match(r"\.loc\s+(\d+)\s+(\d+)", s)
        if m:
            here = (files.get(m.group(1), "").rsplit("/", 1)[-1], int(m.group(2)))
            continue
        if not s or s.startswith((".", "//", "{", "}", "$")) or s.endswith(":"):
            continue
        counts[here] += 1
        wraps += bool(WRAPS.search(s))
    return counts, files, wraps


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ptx", nargs="+", help="one PTX file, or two to compare")
    ap.add_argument("--file", default="seed_block.py", help="the source file whose lines are shown")
    args = ap.parse_args(argv)
    runs = [per_line(p) for p in args.ptx[:2]]
    paths = [p for _, files, _ in runs for p in files.values() if p.rsplit("/", 1)[-1] == args.file]
    source = open(paths[-1]).read().split("\n") if paths else []
    lines = sorted({k[1] for counts, _, _ in runs for k in counts if k and k[0] == args.file})
    for n in lines:
        cols = " ".join(f"{counts.get((args.file, n), 0):5d}" for counts, _, _ in runs)
        print(f"{n:5d} {cols} | {source[n - 1][:100] if 0 < n <= len(source) else ''}")
    for p, (counts, _, wraps) in zip(args.ptx, runs):
        print(f"{p}: {sum(counts.values())} instructions ({sum(v for k, v in counts.items() if k and k[0] == args.file)}"
              f" from {args.file}), {wraps} index wrap-arounds")


if __name__ == "__main__":
    main()
