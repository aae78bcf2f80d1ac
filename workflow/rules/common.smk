# Validation of config and sample sheet, and the Python the rules use: input functions (get_*),
# per-stage parameters, the chunks switch (scatter/gather) and the source hashes that make code
# changes rerun the right stages.

import os
import re
import sys
import urllib.parse
from pathlib import Path

import pandas as pd
import yaml
from snakemake.utils import validate

# The workflow runs the gpualign package it ships with: the one next to this Snakefile. Snakemake
# imports it from there (for the source hashes below), and so do the jobs, through PYTHONPATH,
# whether or not the package is installed in their environment. So the code that a rule's
# params.code hashes is the code its job runs.
REPO = str(Path(workflow.basedir).resolve())
if REPO not in sys.path:
    sys.path.insert(0, REPO)
_pythonpath = os.environ.get("PYTHONPATH", "")
if REPO not in _pythonpath.split(os.pathsep):
    os.environ.update(PYTHONPATH=os.pathsep.join(p for p in (REPO, _pythonpath) if p))

from gpualign.errors import InputError  # noqa: E402
from gpualign.index import chosen_k, index_memory  # noqa: E402
from gpualign.options import MapParams  # noqa: E402
from gpualign.provenance import script_hash  # noqa: E402

# numba's compiled kernels: the jobs use the cache that `gpualign map` and `gpualign compile` use
# (gpualign/jitcache.py): NUMBA_CACHE_DIR when set (a shared folder on a cluster), else per user in
# ~/.cache/gpualign, one folder per version of the kernel code; so only the first run compiles.

NAME_RE = r"[A-Za-z0-9._-]+"


def check_name(what, value):
    """A name that becomes part of file names: letters, digits, '.', '_', '-', no leading '.'."""
    if not isinstance(value, str) or not re.fullmatch(NAME_RE, value) or value.startswith("."):
        raise ValueError(
            f"{what} {value!r} is not a valid name: use letters, digits, '.', '_' and '-' only, "
            "not starting with '.' (it becomes part of file names)"
        )
    return value


# ---- config -----------------------------------------------------------------------------------


def coerce_cli_values(values, schema):
    """Turn '4' back into 4 where the schema wants an integer, and 'false' into False where it wants
    a boolean (YAML's words: true/false, yes/no, on/off, any case).

    `--config align='{max_indels: 4}'` hands nested values over as strings (Snakemake parses
    them with YAML's BaseLoader); top-level `--config` values and config files are typed already.
    """
    for key, sub in schema.get("properties", {}).items():
        value = values.get(key) if isinstance(values, dict) else None
        if isinstance(value, dict):
            coerce_cli_values(value, sub)
        elif isinstance(value, str) and wants_integer(sub) and re.fullmatch(r"[+-]?\d+", value.strip()):
            values[key] = int(value)
        elif isinstance(value, str) and sub.get("type") == "boolean" and value.strip().lower() in YAML_BOOLEANS:
            values[key] = YAML_BOOLEANS[value.strip().lower()]


YAML_BOOLEANS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}


def wants_integer(sub):
    """Whether a schema property takes an integer (itself, or one of its oneOf choices, as index.k)."""
    return sub.get("type") == "integer" or any(choice.get("type") == "integer" for choice in sub.get("oneOf", []))


with open(Path(REPO, "workflow", "schemas", "config.schema.yaml")) as _fh:
    coerce_cli_values(config, yaml.safe_load(_fh))
try:
    check_name("reference.name", config.get("reference", {}).get("name", "lambda"))
except ValueError as err:
    sys.exit(str(err))   # one line, without Snakemake's traceback lines
validate(config, "../schemas/config.schema.yaml")

REFERENCE = config["reference"]["name"]
K = config["index"]["k"]
MAP_PARAMS = {name: config["align"][name] for name in MapParams.names()}
try:
    MapParams(**MAP_PARAMS).check()
except InputError as err:
    sys.exit(f"config align: {err}")


def _is_remote(url):
    return urllib.parse.urlsplit(url).scheme.lower() in ("http", "https", "ftp")


# ---- samples ----------------------------------------------------------------------------------


# One row per unit of a sample (a lane, a flow cell, a library: reads that share a read group), as
# in snakemake-workflows' dna-seq pipelines. Each unit is aligned on its own into
# results/units/{sample}/{unit}.bam with read group ID {sample}.{unit}, and a sample's units are
# merged into results/bam/{sample}.bam. workflow/schemas/samples.schema.yaml describes the columns.

DEFAULT_UNIT = "1"   # the unit of a row with no unit (a sheet of one row per sample)
DEFAULT_PLATFORM = "ILLUMINA"
# the PL values the SAM specification allows (Picard's ValidateSamFile rejects others)
PLATFORMS = ("CAPILLARY", "DNBSEQ", "ELEMENT", "HELICOS", "ILLUMINA", "IONTORRENT", "LS454", "ONT", "PACBIO",
             "SINGULAR", "SOLID", "ULTIMA")
RG_VALUE_RE = r"[ -\[\]-~]*"   # printable ASCII but '\' (gpualign map -R reads '\t' as a field break)


def load_units(path):
    """The sample sheet as a frame indexed by (sample, unit), empty optional cells filled in."""
    if not os.path.isfile(path):
        raise ValueError(f"sample sheet {path!r} (config key samples): no such file")
    sheet = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    sheet.columns = [c.strip() for c in sheet.columns]
    for column in ("sample", "fq1"):
        if column not in sheet.columns:
            raise ValueError(
                f"sample sheet {path}: no column {column!r} "
                "(columns are sample, fq1 and optional unit, fq2, library, platform, platform_unit)"
            )
    sheet = sheet.apply(lambda col: col.str.strip())
    if sheet.empty:
        raise ValueError(f"sample sheet {path}: no samples")
    has_units = "unit" in sheet.columns
    for column in ("unit", "fq2", "library", "platform", "platform_unit"):
        if column not in sheet.columns:
            sheet[column] = ""
    sheet.loc[sheet["unit"] == "", "unit"] = DEFAULT_UNIT

    def row(i):   # how messages name a row: by sample, and by unit where the sheet has units
        s, u = sheet.at[i, "sample"], sheet.at[i, "unit"]
        return f"sample {s!r} unit {u!r}" if has_units else f"sample {s!r}"

    for i in sheet.index:
        check_name(f"sample sheet {path}: sample", sheet.at[i, "sample"])
        check_name(f"sample sheet {path}: sample {sheet.at[i, 'sample']!r} unit", sheet.at[i, "unit"])
    dup = sheet.index[sheet.duplicated(["sample", "unit"])]
    if len(dup):
        hint = "" if has_units else " (give each of its rows a name in a column unit)"
        raise ValueError(f"sample sheet {path}: {row(dup[0])} appears more than once{hint}")
    rg_ids = sheet["sample"].str.cat(sheet["unit"], sep=".")
    clash = sheet.index[rg_ids.duplicated()]
    if len(clash):
        first = sheet.index[rg_ids == rg_ids[clash[0]]][0]
        raise ValueError(
            f"sample sheet {path}: {row(first)} and {row(clash[0])} would share the read group ID "
            f"{rg_ids[first]!r} (sample.unit): rename one"
        )
    for i in sheet.index:
        for column in ("fq1", "fq2"):
            if _is_remote(sheet.at[i, column]):
                raise ValueError(
                    f"sample sheet {path}: {row(i)}: reads from URLs are not supported yet "
                    f"(download the FASTQ and give its path in {column})"
                )
        if not sheet.at[i, "fq1"]:
            raise ValueError(f"sample sheet {path}: {row(i)}: no fq1 (the FASTQ of its reads)")
        if sheet.at[i, "fq2"] == sheet.at[i, "fq1"]:
            raise ValueError(f"sample sheet {path}: {row(i)} has the same file as fq1 and fq2")
        for column in ("library", "platform_unit"):
            if not re.fullmatch(RG_VALUE_RE, sheet.at[i, column]):
                raise ValueError(
                    f"sample sheet {path}: {row(i)}: {column} {sheet.at[i, column]!r} holds a character "
                    "outside printable ASCII or a backslash"
                )
        if sheet.at[i, "platform"].upper() not in ("",) + PLATFORMS:
            raise ValueError(
                f"sample sheet {path}: {row(i)}: platform {sheet.at[i, 'platform']!r} is not one of "
                f"{', '.join(PLATFORMS)} (the SAM specification's PL values, in any case)"
            )
    sheet["platform"] = sheet["platform"].str.upper()
    validate(sheet, "../schemas/samples.schema.yaml")
    return sheet.set_index(["sample", "unit"], drop=False)


try:
    units = load_units(config["samples"])
except ValueError as err:
    sys.exit(str(err))   # one line: a ValueError here would print Snakemake's traceback lines too
# one row per sample, in the order of the sheet
samples = units[["sample"]].drop_duplicates().set_index("sample", drop=False)


def index_k(k, input):
    """The k an index job will use: auto's from the genome's size (the 2-bit image holds 4 bases a byte)."""
    return chosen_k(k, 4 * os.path.getsize(input.packed))


def index_mem_mb(wildcards, input):
    """An index job's memory: gpualign.index.index_memory for its genome and k, the genome image it maps
    (its pages count too) and the interpreter's own 512 MiB."""
    size = 4 * os.path.getsize(input.packed)
    return max(1000, int((index_memory(size, index_k(wildcards.k, input)) + input.size) / 2**20) + 512)


wildcard_constraints:
    sample=NAME_RE,
    unit=NAME_RE,
    name=NAME_RE,
    k=r"\d+|auto",


# ---- per-stage values -------------------------------------------------------------------------


def script_code(script):
    """params.code for workflow/scripts/{script}: the source hash of the gpualign modules the script
    imports and of every gpualign module those import (gpualign.provenance), so a job reruns when
    the code it runs changes: a changed kernel reruns align, not the reference."""
    try:
        return script_hash(str(Path(REPO, "workflow", "scripts", script)), package_dir=str(Path(REPO, "gpualign")))
    except ValueError as err:
        sys.exit(str(err))   # one line: an import of a module that is not (or no longer) there


def remote_reference_url():
    """The reference URL when it is a network one; a local reference is an input instead."""
    return "" if get_reference_source(None) else config["reference"]["url"]


def input_mem_mb(factor, extra_mb=0, floor_mb=1000):
    """mem_mb of a job holding about `factor` times its input in memory (a rough, safe estimate)."""
    return lambda wildcards, input: max(floor_mb, int(factor * input.size_mb + extra_mb))


# Chunks: Snakemake's scatter/gather, align.chunks of them per unit unless --set-scatter chunk=N
# says otherwise (workflow/rules/align.smk).
scattergather:
    chunk=config["align"]["chunks"],


CHUNKS = len(scatter.chunk("{scatteritem}"))
if CHUNKS < 1:
    sys.exit("--set-scatter chunk=N: N must be at least 1 (chunks per unit)")


def chunked():
    """Whether units are aligned in chunks (split_reads -> align per chunk -> merge_chunks)."""
    return CHUNKS > 1


def align_target(suffix):
    """A file align writes: the unit's, results/units/{sample}/{unit}{suffix}, or when chunked a
    chunk's, results/chunks/{sample}/{unit}/{scatteritem}{suffix}, temporary (merge_chunks merges
    the chunk BAMs into the unit's)."""
    if chunked():
        return temp(f"results/chunks/{{sample}}/{{unit}}/{{scatteritem}}{suffix}")
    return f"results/units/{{sample}}/{{unit}}{suffix}"


def align_log():
    """logs/align/{sample}.{unit}.log, or a chunk's logs/align/{sample}.{unit}.{scatteritem}.log."""
    return "logs/align/{sample}.{unit}.{scatteritem}.log" if chunked() else "logs/align/{sample}.{unit}.log"


def align_params():
    """params of align: what changes its BAM (threads do not). The read group is the unit's own, so a
    unit added to the sheet changes no other unit's params."""
    return {
        "backend": config["align"]["backend"],
        "mapping": MAP_PARAMS,
        "compression_level": config["bam"]["compression_level"],
        "markdup": align_marks(),
        "optical_distance": optical_distance() if align_marks() else 0,
        "read_group": lambda wildcards: read_group(wildcards.sample, wildcards.unit),
        "paired": lambda wildcards: is_paired(wildcards.sample, wildcards.unit),
        "code": script_code("align.py"),
    }


def marks_duplicates():
    """bam.mark_duplicates: every sorted BAM is marked as it is written. A unit's BAM holds the
    unit's own duplicates (align marks it, or merge_chunks across its chunks); a sample's BAM those
    of its libraries across its units (merge_units). A sample of one unit gets its unit's BAM."""
    return bool(config["bam"]["mark_duplicates"])


def align_marks():
    """Whether align marks duplicates: it writes a unit's BAM (not a chunk's, which merge_chunks marks
    together), and its metrics beside it (align_metrics)."""
    return marks_duplicates() and not chunked()


def optical_distance():
    """bam.optical_duplicate_pixel_distance (gpualign map --optical-distance)."""
    return int(config["bam"]["optical_duplicate_pixel_distance"])


def unit_metrics():
    """The duplicate counts of a unit's BAM (Picard's DuplicationMetrics layout), written by the job
    that writes the BAM: {metrics: path}, or nothing without marking (unpacked into outputs)."""
    return {"metrics": "results/units/{sample}/{unit}.duplication_metrics.txt"} if marks_duplicates() else {}


def align_metrics():
    """align's metrics output (unit_metrics) where align writes the unit's BAM."""
    return unit_metrics() if align_marks() else {}


def sample_metrics():
    """merge_units' metrics output: results/stats/{sample}.duplication_metrics.txt, with marking."""
    return {"metrics": "results/stats/{sample}.duplication_metrics.txt"} if marks_duplicates() else {}


def read_group(sample, unit):
    """The unit's @RG fields: ID sample.unit, SM sample, LB library (or sample), PL platform (or
    ILLUMINA), PU platform_unit (or unit)."""
    row = get_unit(sample, unit)
    return {
        "ID": f"{sample}.{unit}",
        "SM": sample,
        "LB": row["library"] or sample,
        "PL": row["platform"] or DEFAULT_PLATFORM,
        "PU": row["platform_unit"] or unit,
    }


def align_gpus():
    """GPUs an align job asks for: one unless the backend is cpu (auto prefers the GPU)."""
    return 0 if config["align"]["backend"] == "cpu" else 1


# ---- input functions --------------------------------------------------------------------------


def get_reference_source(wildcards):
    """A local reference (path or file:// URL) is an input, so editing it reruns the workflow."""
    url = config["reference"]["url"]
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() == "file":
        return [urllib.parse.unquote(parts.path)]
    if _is_remote(url):
        return []
    return [url]


def get_genome(wildcards):
    prefix = f"resources/reference/{REFERENCE}"
    return {
        "packed": f"{prefix}.2bit.npy",
        "nmask": f"{prefix}.nmask.npy",
        "contigs": f"{prefix}.contigs.tsv",
    }


def get_index(wildcards):
    return f"resources/reference/{REFERENCE}.k{K}.idx.npz"


def get_unit(sample, unit):
    """The sheet's row of a unit."""
    if (sample, unit) not in units.index:
        raise ValueError(f"sample sheet {config['samples']}: no sample {sample!r} unit {unit!r}")
    return units.loc[(sample, unit)]


def sample_units(sample):
    """The units of a sample, in the order of the sheet."""
    return units.loc[units["sample"] == sample, "unit"].tolist()


def is_paired(sample, unit):
    return get_unit(sample, unit)["fq2"] != ""


def get_fastq(wildcards):
    """The unit's FASTQ: {reads: fq1}, plus {mates: fq2} for paired-end reads."""
    row = get_unit(wildcards.sample, wildcards.unit)
    files = {"reads": row["fq1"]}
    if row["fq2"]:
        files["mates"] = row["fq2"]
    return files


def get_align_reads(wildcards):
    """align's reads: the unit's FASTQ (get_fastq), or when chunked one chunk of it ({chunk: path},
    written by split_reads; a paired unit's chunk holds its mates interleaved)."""
    if chunked():
        return {"chunk": f"results/chunks/{wildcards.sample}/{wildcards.unit}/{wildcards.scatteritem}.fq"}
    return get_fastq(wildcards)


def get_unit_bams(wildcards):
    """The sorted BAMs of a sample's units and their indexes, in the order of the sheet; with marking,
    a sample of one unit also takes that unit's metrics (its BAM is the sample's as it is)."""
    names = sample_units(wildcards.sample)
    files = {
        "bams": [f"results/units/{wildcards.sample}/{unit}.bam" for unit in names],
        "bais": [f"results/units/{wildcards.sample}/{unit}.bam.bai" for unit in names],
    }
    if marks_duplicates() and len(names) == 1:
        files["unit_metrics"] = f"results/units/{wildcards.sample}/{names[0]}.duplication_metrics.txt"
    return files


def get_map_summaries(wildcards):
    """The map summaries of a sample's units (gpualign map --summary, written by align or, when
    chunked, merge_chunks), in the order of the sheet; with marking, the sample's duplicate counts,
    which merge_units found across the units (the units' own counts do not add up to them)."""
    files = {"summaries": [f"results/units/{wildcards.sample}/{unit}.map.json"
                           for unit in sample_units(wildcards.sample)]}
    if marks_duplicates():
        files["metrics"] = f"results/stats/{wildcards.sample}.duplication_metrics.txt"
    return files


def get_reference_fasta(wildcards):
    """The masked FASTA the reads were aligned to: samtools stats -r compares the reads with it
    (mismatches per cycle)."""
    prefix = f"resources/reference/{REFERENCE}"
    return {"fasta": f"{prefix}.fa", "fai": f"{prefix}.fa.fai"}


def sample_is_paired(sample):
    """Whether any of a sample's units is paired: it then gets an insert-size plot."""
    return any(is_paired(sample, unit) for unit in sample_units(sample))


PLOTS = ("mapq", "coverage", "errors", "duplicates", "throughput")   # rule plots, per sample


def sample_plots(sample):
    """The report's plots of a sample: PLOTS, and insert sizes when it has pairs."""
    plots = [f"results/plots/{sample}/{name}.png" for name in PLOTS]
    if sample_is_paired(sample):
        plots.append(f"results/plots/{sample}/insert_sizes.png")
    return plots


def sample_qc_files(sample):
    """What MultiQC reads of a sample: samtools' reports, the map summary table and, with marking,
    the duplicate counts (its Picard module)."""
    names = ["flagstat.txt", "idxstats.txt", "samtools_stats.txt", "map_summary_mqc.tsv"]
    if marks_duplicates():
        names.append("duplication_metrics.txt")
    return [f"results/stats/{sample}.{name}" for name in names]


def get_final_output():
    out = []
    for sample in samples["sample"]:
        out += [
            f"results/bam/{sample}.bam",
            f"results/bam/{sample}.bam.bai",
            f"results/stats/{sample}.flagstat.txt",
            f"results/stats/{sample}.idxstats.txt",
            f"results/stats/{sample}.samtools_stats.txt",
            f"results/stats/{sample}.summary.tsv",
            f"results/stats/{sample}.coverage.tsv",
            f"results/stats/{sample}.map.json",
            f"results/stats/{sample}.map_summary_mqc.tsv",
        ]
        if marks_duplicates():
            out.append(f"results/stats/{sample}.duplication_metrics.txt")
        out += sample_plots(sample)
    if config["qc"]["multiqc"]:
        out.append("results/multiqc/multiqc_report.html")
    return out
