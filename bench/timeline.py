#!/usr/bin/env python3
"""What a run's wall clock waited on, from the timeline `gpualign map` writes when GPUALIGN_TRACE
names a file: per step, its summed time, the CPU seconds its threads spent in it, the wall time
during which at least one thread was in it (its coverage) and how many threads at once on average;
per thread, how busy it was; the CPU seconds of the process's threads still running at its end (the
unnamed ones: numba's parallel workers, decoders' and drivers' own threads) and of those that had
ended; and the wall split into tenths with the busiest steps of each, to see which stage runs alone.

    GPUALIGN_TRACE=t.tsv gpualign map IDX R.fq.gz -o out.bam -t 16 ; python bench/timeline.py t.tsv

With GPUALIGN_TRACE_GIL=1 too, the step "GIL wait (probe)" (thread "GIL probe") covers the moments when a thread
that let go of the GIL waited more than 2 ms to run Python again (gpualign/trace.py); on a GPU, "driver NAME" steps
are the driver's calls that may wait (cuda_driver._call).
"""
import argparse
import collections

import numpy as np


def load(path):
    """The steps (thread, step, start, end, CPU seconds or None), and the threads' CPU seconds at the end
    (name, seconds; the threads that had ended as one; empty in traces written before it was kept)."""
    steps, threads = [], []
    for line in open(path):
        fields = line.rstrip("\n").split("\t")
        if line.startswith("# thread_cpu"):
            threads.append((fields[1], float(fields[2])))
        elif line.startswith("# process_cpu"):   # user + system of every thread, ended ones too
            everything = float(fields[1]) + float(fields[2])
            threads.append(("(threads that had ended)", everything - sum(s for _, s in threads)))
        elif not line.startswith("#") and fields[:2] != ["thread", "step"]:
            cpu = float(fields[4]) if len(fields) > 4 and fields[4] else None
            steps.append((fields[0], fields[1], float(fields[2]), float(fields[3]), cpu))
    return steps, threads


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
    ev, threads = load(args.trace)
    wall = max(e for _, _, _, e, _ in ev) - min(s for _, _, s, _, _ in ev)
    print(f"wall {wall:.2f} s, {len(ev)} steps, {len({t for t, *_ in ev})} threads\n")
    by_step = collections.defaultdict(list)
    cpu_of = collections.Counter()
    for t, s, a, b, cpu in ev:
        by_step[s].append((a, b))
        cpu_of[s] += cpu or 0.0
    print("| step | count | summed s | CPU s | covered s | % of wall | mean threads in it |")
    print("|---|---|---|---|---|---|---|")
    for step, iv in sorted(by_step.items(), key=lambda kv: -coverage(kv[1])):
        summed, cov = sum(b - a for a, b in iv), coverage(iv)
        print(f"| {step} | {len(iv)} | {summed:.2f} | {cpu_of[step]:.2f} | {cov:.2f} | {100 * cov / wall:.0f} | "
              f"{summed / max(cov, 1e-9):.1f} |")
    by_thread = collections.defaultdict(list)
    for t, s, a, b, _ in ev:
        by_thread[t.rsplit("_", 1)[0]].append((a, b))
    print("\n| thread group | steps | covered s (union over the group) |\n|---|---|---|")
    for t, iv in sorted(by_thread.items()):
        print(f"| {t} | {len(iv)} | {coverage(iv):.2f} |")
    if threads:
        groups = collections.defaultdict(list)
        for name, seconds in threads:
            groups[name.rsplit("_", 1)[0]].append(seconds)
        print(f"\nCPU of the process: {sum(s for _, s in threads):.2f} s\n")
        print("| thread group | threads | CPU s |\n|---|---|---|")
        for name, secs in sorted(groups.items(), key=lambda kv: -sum(kv[1])):
            print(f"| {name} | {'' if name.startswith('(') else len(secs)} | {sum(secs):.2f} |")
    edges = np.linspace(0, wall, args.slices + 1)
    print("\n| slice (s) | busiest steps (thread-seconds in the slice) |\n|---|---|")
    for lo, hi in zip(edges[:-1], edges[1:]):
        load_ = collections.Counter()
        for t, s, a, b, _ in ev:
            o = min(b, hi) - max(a, lo)
            if o > 0:
                load_[s] += o
        top = ", ".join(f"{s} {v:.2f}" for s, v in load_.most_common(4))
        print(f"| {lo:.1f}-{hi:.1f} | {top} |")


if __name__ == "__main__":
    main()
