"""What py-spy's samples of a run say (bench/gpu_gil.sh records them): samples per thread (threads named
alike, map_0 and map_1, counted together), and the innermost frames that took the most samples, overall and
per thread. Recorded with --gil, a sample is the one thread holding the GIL at that moment, so the samples
over the run's ticks (--rate x --wall) are the share of the wall in which the GIL was held.

    python bench/gil_report.py gil_ecoli_se.txt --rate 250 --wall 5.6 [--top 25] [--depth 2]
"""

import argparse
import collections
import re


def parse(path):
    """(thread, frames innermost last, samples) for each line of py-spy's raw output."""
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        head, *frames = stack.split(";")
        name = head.split(": ", 1)[1] if ": " in head else "(unnamed)"
        yield name, frames, int(count)


def group(thread: str) -> str:
    """Thread names without their pool numbers: map_0, map_1 -> map_N."""
    return re.sub(r"\d+", "N", thread)


def short(frame: str) -> str:
    """'func (path/to/file.py:12)' -> 'func (file.py:12)'."""
    m = re.match(r"(.*) \((.*?)\)$", frame)
    if not m:
        return frame
    return f"{m.group(1)} ({m.group(2).rsplit('/', 1)[-1]})"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("raw")
    ap.add_argument("--rate", type=float, default=0, help="samples a second the run was recorded at")
    ap.add_argument("--wall", type=float, default=0, help="the run's wall seconds")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--depth", type=int, default=2, help="innermost frames that name a place")
    a = ap.parse_args(argv)
    threads, places, by_thread = collections.Counter(), collections.Counter(), collections.defaultdict(collections.Counter)
    total = 0
    for name, frames, n in parse(a.raw):
        total += n
        g = group(name)
        threads[g] += n
        place = " < ".join(short(f) for f in reversed(frames[-a.depth:])) or "(no Python frame)"
        places[place] += n
        by_thread[g][place] += n
    ticks = a.rate * a.wall
    share = f", {100 * total / ticks:.1f}% of {ticks:.0f} ticks" if ticks else ""
    print(f"# {a.raw}: {total} samples{share}")
    print("| thread | samples | share |")
    print("|---|---|---|")
    for g, n in threads.most_common():
        print(f"| {g} | {n} | {100 * n / max(total, 1):.1f}% |")
    print(f"\n| innermost frames (top {a.top}) | samples |")
    print("|---|---|")
    for place, n in places.most_common(a.top):
        print(f"| {place} | {n} |")
    for g, _ in threads.most_common(6):
        print(f"\n## {g}")
        for place, n in by_thread[g].most_common(8):
            print(f"- {n}: {place}")


if __name__ == "__main__":
    main()
