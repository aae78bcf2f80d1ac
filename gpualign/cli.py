"""Command line: `gpualign index` and `gpualign map`, used as bwa is (the workflow calls the same code)."""

import argparse
import os
import shlex
import sys

from . import __version__
from .atomic import atomic_path
from .errors import InputError, one_line
from .params import MapParams

INDEX_SUFFIXES = (".2bit.npy", ".nmask.npy", ".contigs.tsv", ".idx.npz")


def get_argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpualign", description="GPU short-read DNA aligner")
    parser.add_argument("--version", action="version", version=f"gpualign {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    idx = sub.add_parser("index", help="build the genome image and k-mer index of a FASTA")
    idx.add_argument("reference", help="reference FASTA, plain or gzip")
    idx.add_argument("-p", "--prefix", required=True, help="output prefix (writes PREFIX" + ", PREFIX".join(INDEX_SUFFIXES) + ")")
    idx.add_argument("-k", type=int, default=8, help="k-mer length of the hash bins [8]; 8 suits genomes up to ~10 Mbp, use 11-12 for a human chromosome (a warning suggests k when bins are too full)")
    idx.add_argument("--max-occ", type=int, default=500, help="bins with more positions are skipped when seeding [500]")

    mp = sub.add_parser("map", help="align reads; SAM to stdout, or a coordinate-sorted, indexed BAM with -o X.bam")
    mp.add_argument("prefix", help="index prefix given to `gpualign index`")
    mp.add_argument("reads", help="reads, FASTQ plain or gzip (R1 of paired reads)")
    mp.add_argument("mates", nargs="?", help="R2 of paired reads: the mates, in the same order as in READS")
    mp.add_argument("-o", "--output", default="-", help="output: X.bam for a sorted BAM plus X.bam.bai, anything else SAM in read order; default SAM on stdout")
    mp.add_argument("--unsorted", action="store_true", help="write the BAM in read order, without an index")
    mp.add_argument("-l", "--compression-level", type=int, default=1, choices=range(0, 10), metavar="0-9",
                    help="BGZF deflate level of the BAM [1: ISA-L, several times faster than 6 for files about 15%% bigger]")
    mp.add_argument("--backend", choices=["auto", "cuda", "cpu"], default="auto", help="where kernels run [auto: cuda if a GPU is usable]")
    mp.add_argument("-t", "--threads", type=int, default=1, help="CPU threads: FASTQ decompression and parsing, the CPU backend, BAM encoding and compression [1]")
    mp.add_argument("--rg-id", help="read group ID written as @RG and RG:Z tags")
    mp.add_argument("--sample", help="read group sample (SM); defaults to the read group ID")
    defaults = MapParams()
    for name in MapParams.names():
        mp.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(defaults, name),
                        help=f"[{getattr(defaults, name)}]")
    return parser


def run_index(args, log):
    from .genome import pack_reference
    from .index import build_index, save_index
    prefix = args.prefix
    genome = pack_reference(args.reference, prefix + ".2bit.npy", prefix + ".nmask.npy", prefix + ".contigs.tsv")
    log(f"packed {len(genome.names)} contigs, {genome.size} bp")
    index = build_index(genome, args.k, args.max_occ, progress=log)
    save_index(index, prefix + ".idx.npz", genome.size)
    log(f"index k={index.k}: {len(index.positions)} positions, {index.capped_bins} bins over max_occ={index.max_occ}")
    return 0


def load_prefix(prefix):
    from .genome import load_genome
    from .index import load_index
    missing = [prefix + s for s in INDEX_SUFFIXES if not os.path.exists(prefix + s)]
    if missing:
        raise InputError(f"index {prefix}: missing {missing[0]} (run `gpualign index REF.fa -p {prefix}` first)")
    genome = load_genome(prefix + ".2bit.npy", prefix + ".nmask.npy", prefix + ".contigs.tsv")
    return genome, load_index(prefix + ".idx.npz")


def read_group(rg_id, sample):
    if not rg_id:
        return None
    if any(c.isspace() for c in rg_id):
        raise InputError(f"read group ID {rg_id!r}: must not contain white space")
    return {"ID": rg_id, "SM": sample or rg_id, "PL": "ILLUMINA"}


def run_map(args, log, argv):
    from .fastq import read_batches, read_interleaved_pairs
    from .mapper import map_reads
    import numba
    threads = max(1, args.threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    params = MapParams(**{n: getattr(args, n) for n in MapParams.names()}).check()
    genome, index = load_prefix(args.prefix)
    if args.mates:
        reads = read_interleaved_pairs(args.reads, args.mates, index.k, params.batch_size, threads)
    else:
        reads = read_batches(args.reads, index.k, params.batch_size, threads)
    command_line = "gpualign " + " ".join(shlex.quote(a) for a in argv)
    options = dict(p=params, backend_name=args.backend, threads=threads, read_group=read_group(args.rg_id, args.sample),
                   command_line=command_line, log=log, compression_level=args.compression_level,
                   paired=bool(args.mates))
    if args.output == "-" or not args.output.endswith(".bam"):
        if args.output == "-":
            map_reads(genome, index, reads, "-", sam=True, **options)
            return 0
        with atomic_path(args.output) as tmp:
            map_reads(genome, index, reads, tmp, sam=True, **options)
        return 0
    if args.unsorted:
        with atomic_path(args.output) as tmp:
            map_reads(genome, index, reads, tmp, **options)
        return 0
    # the index is renamed into place after the BAM, so a .bai never sits beside a missing BAM
    with atomic_path(args.output + ".bai") as tmp_bai, atomic_path(args.output) as tmp:
        map_reads(genome, index, reads, tmp, sort=True, index_path=tmp_bai, **options)
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = get_argument_parser().parse_args(argv)
    log = lambda msg: print(f"[gpualign {args.command}] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    try:
        if args.command == "index":
            return run_index(args, log)
        return run_map(args, log, argv)
    except InputError as exc:
        print(f"gpualign: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 1
    except OSError as exc:   # a full disk, a read-only folder: one line, and the output was not written
        target = getattr(args, "output", None) or getattr(args, "prefix", None) or "output"
        print(f"gpualign: error: {one_line(exc, target)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:   # outputs are written atomically: nothing half-written is left
        print("gpualign: interrupted", file=sys.stderr)
        return 130


def entry_point():
    sys.exit(main())
