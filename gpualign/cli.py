"""Command line: `gpualign index` and `gpualign map`, used as bwa is (the workflow calls the same code).

Every argument is checked before any work starts; bad input is one line on stderr and exit 1.
"""

import argparse
import os
import shlex
import sys

from . import __version__, detach, trace
from .errors import InputError, one_line
from .options import (AUTO_K, HELP, INDEX_HELP, MAX_K, MIN_K, OPTICAL_DISTANCE, OPTICAL_HELP, TUNING, IndexParams,
                      MapParams, Tuning)

GENOME_SUFFIXES = (".2bit.npy", ".nmask.npy", ".contigs.tsv")
INDEX_SUFFIX = ".idx.npz"


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def k_value(text: str) -> int | str:
    if text == AUTO_K:
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {AUTO_K} or between {MIN_K} and {MAX_K}, got {text}")
    if not MIN_K <= value <= MAX_K:
        raise argparse.ArgumentTypeError(f"must be between {MIN_K} and {MAX_K}, got {value}")
    return value


def get_argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpualign", description="GPU short-read DNA aligner")
    parser.add_argument("-v", "--version", action="version", version=f"gpualign {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    idx = sub.add_parser("index", help="build the genome image and k-mer index of a FASTA (as bwa index)")
    idx.add_argument("reference", help="reference FASTA, plain or gzip")
    idx.add_argument("-p", "--prefix", required=True,
                     help="output prefix: writes PREFIX.fa (+ .fai: the masked sequence, for CRAM), PREFIX"
                          + ", PREFIX".join(GENOME_SUFFIXES) + ", PREFIX" + INDEX_SUFFIX)
    index_defaults = IndexParams()
    idx.add_argument("-k", type=k_value, default=index_defaults.k, metavar=f"{AUTO_K}|{MIN_K}-{MAX_K}",
                     help=f"{INDEX_HELP['k']} [{index_defaults.k}]")
    idx.add_argument("--max-occ", type=positive_int, default=index_defaults.max_occ,
                     help=f"{INDEX_HELP['max_occ']} [{index_defaults.max_occ}]")
    idx.add_argument("-t", "--threads", type=positive_int, default=1,
                     help="CPU threads building the index (ranges of k-mers built apart; the index is the same) [1]")

    mp = sub.add_parser("map", help="align reads (as bwa mem): SAM to stdout, or sorted BAM/CRAM with -o",
                        description="Align single-end or paired reads against an index built by `gpualign index` "
                                    "(or the workflow's resources/reference/NAME.kK).")
    mp.add_argument("prefix", help="index prefix, as given to `gpualign index -p`")
    mp.add_argument("reads", help="reads, FASTQ plain or gzip; '-' or a pipe reads a stream (R1 of paired reads)")
    mp.add_argument("mates", nargs="?", help="R2 of paired reads: the mates, in the same order as in READS")
    io = mp.add_argument_group("input and output")
    io.add_argument("-p", "--interleaved", action="store_true",
                    help="READS holds pairs: consecutive records with the same name are mates (as bwa mem -p)")
    io.add_argument("-o", "--output", default="-",
                    help="output file: X.bam (coordinate-sorted, + X.bam.bai), X.cram (sorted, + X.cram.crai, "
                         "against the index's FASTA), X.sam (read order); '-' or no extension: SAM [-: stdout]")
    io.add_argument("-O", "--output-format", type=str.lower, choices=["sam", "bam", "cram"],
                    help="format, whatever the output's name says")
    io.add_argument("--unsorted", action="store_true", help="BAM or CRAM in read order, without an index")
    io.add_argument("-R", "--read-group", metavar="LINE",
                    help=r"read group header line such as '@RG\tID:lane1\tSM:NA12878\tLB:lib1\tPL:ILLUMINA' "
                         r"(\t is a tab; ID required); RG:Z:ID is added to every record (as bwa mem -R)")
    io.add_argument("-C", "--append-comment", action="store_true",
                    help="append each read's FASTQ comment (SAM tags such as BC:Z:ACGT) to its record (as bwa mem -C)")
    io.add_argument("-l", "--compression-level", type=int, default=1, choices=range(0, 10), metavar="0-9",
                    help="BGZF deflate level of the BAM [1: ISA-L, several times faster than 6 for files about 15%% "
                         "bigger]")
    io.add_argument("--markdup", action="store_true",
                    help="flag duplicates (0x400) as the sorted BAM or CRAM is written, as Picard MarkDuplicates "
                         "and samtools markdup do: pairs by both mates' unclipped 5' ends, single reads by theirs, "
                         "the best base qualities kept; nothing removed [off]")
    io.add_argument("--markdup-metrics", metavar="FILE",
                    help="with --markdup: the duplicate counts in Picard's DuplicationMetrics layout (MultiQC reads it)")
    io.add_argument("--summary", metavar="FILE",
                    help="what the run did, as JSON: reads, mapped, seconds, seconds per stage, the insert-size "
                         "estimates (paired) and duplicate counts (--markdup); the workflow's report plots it")
    io.add_argument("--optical-distance", type=non_negative_int, default=OPTICAL_DISTANCE, metavar="N",
                    help=OPTICAL_HELP)
    run = mp.add_argument_group("resources")
    run.add_argument("--backend", choices=["auto", "cuda", "cpu"], default="auto",
                     help="where kernels run [auto: cuda if a GPU is usable]")
    run.add_argument("-t", "--threads", type=positive_int, default=1,
                     help="CPU threads: FASTQ decompression and parsing, the CPU backend, BAM encoding and "
                          "compression [1]")
    opts = mp.add_argument_group("mapping options (the workflow's align section)")
    defaults = MapParams()
    for name in MapParams.names():
        opts.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(defaults, name), metavar="N",
                          help=f"{HELP[name]} [{getattr(defaults, name)}]")

    cp = sub.add_parser("compile", help="compile every kernel ahead of use (the first run does it otherwise)",
                        description="Compile every kernel into numba's cache, which `gpualign map` and the workflow "
                                    "share: NUMBA_CACHE_DIR if set, else ${XDG_CACHE_HOME:-~/.cache}/gpualign. "
                                    "Once per machine (CPU or GPU model) and version of the kernel code.")
    cp.add_argument("--backend", choices=["auto", "cuda", "cpu"], default="auto",
                    help="the backend to compile for [auto: cuda if a GPU is usable]")
    cp.add_argument("--no-check", action="store_true",
                    help="skip checking that a fresh process then loads every kernel from the cache")
    return parser


def run_index(args, log):
    from .genome import load_genome, pack_reference
    from .index import build_index, save_index
    from .reference import mask_reference
    from .seqio import check_input
    prefix = args.prefix
    check_input(args.reference, "reference")
    if os.path.isdir(prefix) or prefix.endswith("/"):
        raise InputError(f"prefix {prefix}: is a folder; give a prefix such as {os.path.join(prefix, 'genome')}")
    if os.path.exists(prefix + ".fa") and os.path.samefile(args.reference, prefix + ".fa"):
        raise InputError(f"prefix {prefix}: would write the masked sequence over the reference {args.reference}; "
                         "give another prefix")
    # the masked FASTA is the sequence the reads are aligned to: CRAM output refers to it
    summary = mask_reference(args.reference, prefix + ".fa", prefix + ".nmask.bed", prefix + ".contigs.tsv")
    size = pack_reference(prefix + ".fa", prefix + ".2bit.npy", prefix + ".nmask.npy").size
    log(f"packed {summary['contigs']} contigs, {size} bp ({summary['n_bases']} N)")
    # the image again, memory-mapped: the build reads it where it lies (a human genome's 1.2 GB)
    genome = load_genome(prefix + ".2bit.npy", prefix + ".nmask.npy", prefix + ".contigs.tsv")
    index = build_index(genome, args.k, args.max_occ, threads=args.threads, progress=log)
    save_index(index, prefix + INDEX_SUFFIX, genome.size, genome=os.path.basename(prefix))
    log(f"index k={index.k}: {len(index.positions)} positions, {index.capped_bins} bins over max_occ={index.max_occ}")
    return 0


def index_files(prefix: str) -> tuple[str, list]:
    """(genome prefix, every file of the index) of an index prefix; a missing file is one line."""
    from .index import genome_of_index
    index_path = prefix + INDEX_SUFFIX
    if not os.path.exists(index_path):
        raise InputError(f"index {prefix}: missing {index_path} (run `gpualign index REF.fa -p {prefix}` first)")
    genome = genome_of_index(index_path)
    files = [genome + s for s in GENOME_SUFFIXES]
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        raise InputError(f"index {prefix}: missing {missing[0]} (run `gpualign index REF.fa -p {prefix}` first)")
    return genome, files + [index_path]


def check_read_inputs(args):
    from .seqio import check_input
    paths = [args.reads] + ([args.mates] if args.mates else [])
    if args.interleaved and args.mates:
        raise InputError("-p reads pairs from one file: give READS only, or READS and MATES without -p")
    if paths.count("-") > 1:
        raise InputError("reads: '-' (stdin) can be given once only")
    for path in paths:
        check_input(path, "reads")
    if args.mates and args.mates == args.reads:
        raise InputError(f"reads {args.reads}: given as both READS and MATES")
    return paths


def open_reads(args, k: int, batch_size: int, threads: int, block: int, device):
    """Batches of reads as the mapper takes them, with -C comments checked record by record. device
    (fastq.DeviceParsing): the switch that leaves single-end batches raw for the GPU to parse."""
    from . import fastq
    from .batches import read_interleaved_pairs, read_smart_pairs
    from .seqio import shown
    from .tags import check_comments
    comments = args.append_comment
    if args.mates:
        batches = read_interleaved_pairs(args.reads, args.mates, k, batch_size, threads, comments, block)
        describe = lambda done, r: f"reads {shown(args.mates if r % 2 else args.reads)} record {done // 2 + r // 2 + 1}"  # noqa: E731
    elif args.interleaved:
        batches = read_smart_pairs(args.reads, k, batch_size, threads, comments, block)
        describe = lambda done, r: f"reads {shown(args.reads)} record {done + r + 1}"  # noqa: E731
    else:
        batches = fastq.read_batches(args.reads, k, batch_size, threads, comments=comments, ramp=True, device=device)
        describe = lambda done, r: f"reads {shown(args.reads)} record {done + r + 1}"  # noqa: E731
    if not comments:
        return batches

    def checked():
        done = 0
        for batch in batches:
            check_comments(batch, lambda r: describe(done, r))
            done += len(batch)
            yield batch
    return checked()


def run_map(args, log, argv, tuning: Tuning):
    from .seqio import drop_early, start_decoding
    read_paths = check_read_inputs(args)
    start_decoding([args.reads] + ([args.mates] if args.mates else []), args.threads,   # beside the imports below
                   ramp=not (args.mates or args.interleaved))
    if args.backend != "cpu" and not os.environ.get("NUMBA_ENABLE_CUDASIM"):
        from . import cuda_driver as driver
        driver.init_in_background()   # about 0.2 s of CUDA's start, beside the checks and imports that follow
    try:
        return plan_and_map(args, log, argv, tuning, read_paths)
    finally:
        drop_early()   # what was decoded ahead and not read (a command that failed first) stopped


def plan_and_map(args, log, argv, tuning: Tuning, read_paths: list):
    """run_map's other arguments checked and its outputs planned, then map_with."""
    with trace.span("start: check the arguments, plan the outputs"):
        from .cram import check_reference
        from .output import plan_file, plan_output
        from .sam import parse_read_group
        params = MapParams(**{n: getattr(args, n) for n in MapParams.names()}, tuning=tuning).check()
        read_group = parse_read_group(args.read_group) if args.read_group else None
        genome_prefix, files = index_files(args.prefix)
        fasta = genome_prefix + ".fa"
        beside = [fasta, fasta + ".fai", genome_prefix + ".nmask.bed"]   # written by `gpualign index` too
        out = plan_output(args.output, args.output_format, args.unsorted, inputs=read_paths + files + beside)
        args.planned_output = out   # errors while writing name the path the user gave
        if out.fmt == "cram":
            check_reference(fasta)
        if args.markdup and not out.sort:
            raise InputError(f"--markdup: duplicates are marked as a coordinate-sorted BAM or CRAM is written; "
                             f"output {args.output} is {'unsorted ' if out.fmt != 'sam' else ''}{out.fmt.upper()}")
        if args.markdup_metrics and not args.markdup:
            raise InputError("--markdup-metrics: give --markdup too")
        if args.optical_distance and not args.markdup:
            raise InputError("--optical-distance: give --markdup too")
        metrics = (plan_file(args.markdup_metrics, read_paths + files + beside, "--markdup-metrics")
                   if args.markdup_metrics else (None, False))
        if metrics[0] is not None and metrics[0] in (out.path, out.index_path):
            raise InputError(f"--markdup-metrics {args.markdup_metrics}: is the output or its index")
        summary = (plan_file(args.summary, read_paths + files + beside, "--summary") if args.summary else (None, False))
        if summary[0] is not None and summary[0] in (out.path, out.index_path, metrics[0]):
            raise InputError(f"--summary {args.summary}: is the output, its index or the metrics file")
    return map_with(args, log, argv, params, read_group, genome_prefix, fasta, out, metrics, summary, tuning)


def map_with(args, log, argv, params, read_group, genome_prefix, fasta, out, metrics, summary, tuning: Tuning):
    """run_map once every argument is checked: the genome, index and reads loaded, mapped, written."""
    from .output import writing, written
    from .qc.map_summary import write_summary
    with trace.span("start: import the mapper"):   # beside the decoding begun by run_map
        import numba
        from .fastq import DeviceParsing
        from .genome import load_genome
        from .heap import keep_freed_memory
        from .index import load_index
        from .mapper import map_reads
    keep_freed_memory()   # before the threads: batches reuse memory rather than page-faulting it in
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    with trace.span("load genome and index"):
        genome = load_genome(*(genome_prefix + s for s in GENOME_SUFFIXES))
        index = load_index(args.prefix + INDEX_SUFFIX)
    # an explicit cuda backend parses single-end reads on the GPU from the first batch; map_reads decides
    # for auto, and turns it off where more than the GPU's BAM records is asked for (mapper.parses_raw)
    device = DeviceParsing(args.backend == "cuda")
    reads = open_reads(args, index.k, params.batch_size, args.threads, tuning.insert_block, device)
    log(f"writing {out.describe()}")
    with (writing(out) as (path, index_path), written(*metrics) as metrics_path,
          written(*summary) as summary_path):
        done = map_reads(genome, index, reads, path, params, backend_name=args.backend, threads=args.threads,
                         read_group=read_group, command_line="gpualign " + shlex.join(argv), log=log, fmt=out.fmt,
                         compression_level=args.compression_level, sort=out.sort, index_path=index_path,
                         paired=bool(args.mates or args.interleaved), reference_fasta=fasta, markdup=args.markdup,
                         metrics_path=metrics_path, output_name=out.given, optical_distance=args.optical_distance,
                         device_parsing=device)
        if summary_path:
            write_summary(summary_path, done)
    return 0


def main(argv=None, tuning: Tuning = TUNING) -> int:
    """Run one command; returns the exit status. tuning: the method's constants (benchmarks vary them)."""
    if argv is None:   # the command's own process (a caller in Python started long before): its start traced
        trace.since_process_start("start: Python and the command line")
        trace.start_gil_probe()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = get_argument_parser().parse_args(argv)
    log = lambda msg: print(f"[gpualign {args.command}] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    try:
        if args.command == "index":
            return run_index(args, log)
        if args.command == "compile":
            from .compile import run as run_compile
            return run_compile(args, log)
        return run_map(args, log, argv, tuning)
    except InputError as exc:
        print(f"gpualign: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:   # the reader of stdout went away (`| head`): stop quietly
        sys.stdout = open(os.devnull, "w")
        return 1
    except OSError as exc:   # a full disk, a read-only folder: one line, and the output was not written
        from .output import user_message
        out = getattr(args, "planned_output", None)
        target = out.given if out else (getattr(args, "prefix", None) or "output")
        print(f"gpualign: error: {one_line(user_message(exc, out), target)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:   # outputs are written atomically: nothing half-written is left
        print("gpualign: interrupted", file=sys.stderr)
        return 130


def entry_point():
    """The `gpualign` command: main(), then out at once. Every output is closed and in place when
    main returns, so the interpreter's teardown (the CUDA context, threads, gigabytes of arrays:
    0.7 s after a 4 M-read run on the GPU host) has nothing left to do for the user; and main runs
    in a child process (detach.py), so neither has the kernel's freeing of its memory."""
    # numba imports scipy.linalg at its first compilation or cache load only to learn whether
    # np.dot and np.linalg can be compiled (0.36 s of every run on the GPU host), and scipy itself at
    # its import only to check scipy's version (0.036 s there); no kernel here uses them, so the
    # command, which imports nothing else of scipy, tells it there is none.
    sys.modules.setdefault("scipy", None)
    sys.modules.setdefault("scipy.linalg", None)
    os._exit(detach.flushed(detach.run(main)))   # run returns only where it did not detach (detach.py)
