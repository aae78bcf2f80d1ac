"""What the resident chain's largest kernels' times follow (GPU): one batch of simulated reads mapped on
the resident chain alone (a batch in flight, so no other kernel shares the GPU), each kernel's time
read from its CUDA events, under settings that change one cost at a time (--set: MapParams fields
such as max_hits, work that follows the hits, or max_candidates, the vote's rounds; or launch
constants such as SEED_FIRST_THREADS or CLOSE_BLOCKS). Prints a table: setting, then the median ms over
REPEAT runs of each kernel named in --kernels (substrings of the kernels' names; the first one's runs
in full).

    python3 bench/seed_probe.py PREFIX READS.fq.gz [--reads 200000] [--repeat 5] [--set NAME=VALUE,...]

PREFIX: a `gpualign index` prefix; READS: any FASTQ (its first --reads records are the batch).
"""

import argparse
import os
import statistics
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.environ.get("SEED_PROBE_PACKAGE", REPO))   # the package timed: the checkout's, or a copy


def kernel_ms(trace_events, since: int) -> dict:
    """Summed milliseconds of each kernel among the trace's events from index `since`."""
    out = {}
    for thread, step, start, end, _ in trace_events[since:]:
        if thread == "GPU, from its start event":
            name = step.split()[1]
            out[name] = out.get(name, 0.0) + 1e3 * (end - start)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prefix")
    ap.add_argument("reads")
    ap.add_argument("--reads", dest="n", type=int, default=200000, help="the batch: this many first records")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--kernels",
                    default="seed_,seed_small,seed_shared,seed_block,open_pairs,close_pairs,choose,close_traces",
                    help="comma-separated substrings of the kernels' names, a column each (seed_: every seeding)")
    ap.add_argument("--save", help="write the default setting's BAM records (its last run) to this file, to compare")
    ap.add_argument("--set", action="append", default=[],
                    help="a setting to time: comma-separated NAME=VALUE of MapParams fields or launch constants")
    args = ap.parse_args(argv)
    os.environ.setdefault("GPUALIGN_TRACE", "/tmp/seed_probe_trace.tsv")

    import dataclasses
    from gpualign import trace
    from gpualign.backends import cuda, launch
    from gpualign.cli import GENOME_SUFFIXES, INDEX_SUFFIX
    from gpualign.fastq import read_batches
    from gpualign.genome import load_genome
    from gpualign.index import genome_of_index, load_index
    from gpualign.mapper import map_batch
    from gpualign.options import MapParams

    index = load_index(args.prefix + INDEX_SUFFIX)
    genome = load_genome(*(genome_of_index(args.prefix + INDEX_SUFFIX) + s for s in GENOME_SUFFIXES))
    batch = next(iter(read_batches(args.reads, index.k, args.n)))
    base = MapParams()
    settings = [""] + list(args.set)
    print(f"{len(batch)} reads, k={index.k}, max_occ={index.max_occ}; defaults max_hits={base.max_hits} "
          f"max_candidates={base.max_candidates} SEED_FIRST_THREADS={launch.SEED_FIRST_THREADS}")
    kernels = args.kernels.split(",")
    print("| setting | " + " | ".join(f"{k} ms" for k in kernels) + " | all runs, first column |")
    print("|---" * (len(kernels) + 2) + "|")
    for setting in settings:
        p, saved = base, {}
        for item in filter(None, setting.split(",")):
            name, value = item.split("=")
            if hasattr(launch, name):
                saved[name] = getattr(launch, name)
                setattr(launch, name, int(value))
            else:
                p = dataclasses.replace(p, **{name: int(value)})
        runs = []
        for _ in range(args.repeat + 1):   # the first run compiles or loads
            since = len(trace._events)
            res = map_batch(cuda.prepare_reads(batch), genome, index, p, cuda, rg=b"", alignments=False)
            ms = kernel_ms(trace._events, since)
            runs.append([sum(v for name, v in ms.items() if k in name) for k in kernels])
        runs = runs[1:]
        medians = [statistics.median(r[c] for r in runs) for c in range(len(kernels))]
        print(f"| {setting or 'default'} | " + " | ".join(f"{m:.3f}" for m in medians) + " | "
              + " ".join(f"{r[0]:.2f}" for r in runs) + " |", flush=True)
        for name, value in saved.items():
            setattr(launch, name, value)
        if args.save and not setting:
            with open(args.save, "wb") as fh:
                fh.write(bytes(memoryview(res.records[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
