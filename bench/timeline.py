#!/usr/bin/env python3
"""What a run's wall clock waited on, from the timeline `gpualign map` writes when GPUALIGN_TRACE
names a file: per step, its summed time, the wall time during which at least one thread was in it
(its coverage) and how many threads at once on average; per thread, how busy it was; and the wall
split into tenths with the busiest steps of each, to see which stage runs alone.

    GPUALIGN_TRACE=t.tsv gpualign map IDX R.fq.gz -o out.bam -t 16 ; python bench/timeline.py t.tsv
"""
import argparse
import collections

import numpy as np


def load(path):
    rows = [line.rstrip("\n").split("\t") for line in open(path) if not line.startswith("#")][1:]
    return [(t, s, float(a), float(b)) for t, s, a, b in rows]


def coverage(intervals):
    """Seconds covered by the union of (start, end) intervals."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + ((cur_e - cur_s) if cur_e is not None else 0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--slices", type=int, default=10, help="parts the wall is split into for the last table")
    args = ap.parse_args()
    ev = load(args.trace)
    wall = max(e for _, _, _, e in ev) - min(s for _, _, s, _ in ev)
    print(f"wall {wall:.2f} s, {len(ev)} steps, {len({t for t, *_ in ev})} threads\n")
    by_step = collections.defaultdict(list)
    for t, s, a, b in ev:
        by_step[s].append((a, b))
    print("| step | count | summed s | covered s | % of wall | mean threads in it |\n|---|---|---|---|---|---|")
    for step, iv in sorted(by_step.items(), key=lambda kv: -coverage(kv[1])):
        summed, cov = sum(b - a for a, b in iv), coverage(iv)
        print(f"| {step} | {len(iv)} | {summed:.2f} | {cov:.2f} | {100 * cov / wall:.0f} | {summed / max(cov, 1e-9):.1f} |")
    by_thread = collections.defaultdict(list)
    for t, s, a, b in ev:
        by_thread[t.rsplit("_", 1)[0]].append((a, b))
    print("\n| thread group | steps | covered s (union over the group) |\n|---|---|---|")
    for t, iv in sorted(by_thread.items()):
        print(f"| {t} | {len(iv)} | {coverage(iv):.2f} |")
    edges = np.linspace(0, wall, args.slices + 1)
    print("\n| slice (s) | busiest steps (thread-seconds in the slice) |\n|---|---|")
    for lo, hi in zip(edges[:-1], edges[1:]):
        load_ = collections.Counter()
        for t, s, a, b in ev:
            o = min(b, hi) - max(a, lo)
            if o > 0:
                load_[s] += o
        top = ", ".join(f"{s} {v:.2f}" for s, v in load_.most_common(4))
        print(f"| {lo:.1f}-{hi:.1f} | {top} |")


if __name__ == "__main__":
    main()
