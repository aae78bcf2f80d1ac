"""What bench/stack_probe's samples say: the gaps where no thread switched (the GIL held), and each thread's
commonest innermost frames within a window of the trace's clock.

    python bench/stack_probe/report.py trace_X.tsv [--from S --to S]   (reads trace_X.tsv.stacks.tsv; S: trace seconds)
"""
import argparse
import collections


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--from", dest="lo", type=float, default=0.0)
    ap.add_argument("--to", dest="hi", type=float, default=9e9)
    ap.add_argument("--top", type=int, default=4)
    a = ap.parse_args()
    with open(a.trace) as fh:
        t0_epoch = float(fh.readline().split("=")[1].split()[0])
    rows = []
    with open(a.trace + ".stacks.tsv") as fh:
        perf0 = float(fh.readline().split("=")[1])
        for line in fh:
            t, gap, thread, frames = line.rstrip("\n").split("\t")
            rows.append((float(t) + perf0 - t0_epoch, float(gap), thread, frames))
    rows = [r for r in rows if a.lo <= r[0] <= a.hi]
    seen = sorted({(r[0], r[1]) for r in rows})
    print(f"{len(seen)} samples from {seen[0][0]:.3f} to {seen[-1][0]:.3f} s (trace clock)" if seen else "no samples")
    print("gaps over 8 ms (ending at, ms):", ", ".join(f"{t:.3f} {g:.0f}" for t, g in seen if g > 8))
    by_thread = collections.defaultdict(collections.Counter)
    for _, _, thread, frames in rows:
        by_thread[thread][frames] += 1
    for thread, counts in sorted(by_thread.items()):
        total = sum(counts.values())
        print(f"\n{thread} ({total} samples)")
        for frames, n in counts.most_common(a.top):
            print(f"  {n:4d}  {frames}")


if __name__ == "__main__":
    main()
