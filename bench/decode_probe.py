"""The mapper's decoding of a FASTQ.gz alone: seqio.Input with rapidgzip (its decoding process) read in
48 MiB blocks and thrown away, as fastq.chunks reads it, on a machine that is idle or kept busy by
--load processes spinning in Python (the share of the cores a mapping run takes beside its decoder).
Prints one tab-separated line: package, file, threads, load, its niceness, wall s, this process's CPU-s,
the children's CPU-s (the decoding process's and the load's), bytes, and the decoder that gave them (isal
where the decoding process failed).

    python3 bench/decode_probe.py FILE.fq.gz [--package DIR] [--threads 16] [--load 6 [--nice 10]]
"""

import argparse
import multiprocessing
import os
import resource
import sys
import time


def spin(stop, nice):
    os.nice(nice)
    while not stop.is_set():
        sum(range(10000))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fastq")
    ap.add_argument("--package", default=".", help="folder holding the gpualign package to time")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--load", type=int, default=0, help="processes spinning in Python meanwhile")
    ap.add_argument("--nice", type=int, default=0, help="the spinning processes' niceness")
    args = ap.parse_args()
    fastq = os.path.abspath(args.fastq)
    os.chdir(args.package)   # `python -m` in the decoding child puts the folder it starts in first
    sys.path.insert(0, os.getcwd())
    from gpualign.seqio import READ_BLOCK, Input
    stop = multiprocessing.Event()
    load = [multiprocessing.Process(target=spin, args=(stop, args.nice)) for _ in range(args.load)]
    for p in load:
        p.start()
    time.sleep(0.2)
    own, start = time.process_time(), time.perf_counter()
    total = 0
    with Input(fastq, "reads", args.threads, decoder="rapidgzip") as fh:
        while block := fh.read(READ_BLOCK):
            total += len(block)
        decoder = fh.decoder   # isal where the decoding process failed
    wall, own = time.perf_counter() - start, time.process_time() - own
    stop.set()
    for p in load:
        p.join()
    child = resource.getrusage(resource.RUSAGE_CHILDREN)   # the load's processes and the decoder's
    print(f"{args.package}\t{os.path.basename(args.fastq)}\t{args.threads}\t{args.load}\t{args.nice}\t"
          f"{wall:.3f}\t{own:.2f}\t{child.ru_utime + child.ru_stime:.2f}\t{total}\t{decoder}")


if __name__ == "__main__":
    main()
