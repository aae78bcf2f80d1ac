# Validation of config and sample sheet, and the Python the rules use: input functions (get_*),
# per-stage parameters and the source hashes that make code changes rerun the right stages.

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
from gpualign.params import MapParams  # noqa: E402
from gpualign.provenance import source_hash  # noqa: E402

# numba compiles every kernel on first use in each job's process; its on-disk cache lives in a
# folder the workflow owns, so only the first run pays. An outside NUMBA_CACHE_DIR wins.
os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(".snakemake", "numba_cache").resolve()))

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


def coerce_cli_integers(values, schema):
    """Turn '4' back into 4 where the schema wants an integer.

    `--config align='{max_indels: 4}'` hands nested values over as strings (Snakemake parses
    them with YAML's BaseLoader); top-level `--config` values and config files are typed already.
    """
    for key, sub in schema.get("properties", {}).items():
        value = values.get(key) if isinstance(values, dict) else None
        if isinstance(value, dict):
            coerce_cli_integers(value, sub)
        elif isinstance(value, str) and sub.get("type") == "integer" and re.fullmatch(r"[+-]?\d+", value.strip()):
            values[key] = int(value)


with open(Path(REPO, "workflow", "schemas", "config.schema.yaml")) as _fh:
    coerce_cli_integers(config, yaml.safe_load(_fh))
check_name("reference.name", config.get("reference", {}).get("name", "lambda"))
validate(config, "../schemas/config.schema.yaml")

REFERENCE = config["reference"]["name"]
K = config["index"]["k"]
MAP_PARAMS = {name: config["align"][name] for name in MapParams.names()}
try:
    MapParams(**MAP_PARAMS).check()
except InputError as err:
    raise ValueError(f"config align: {err}") from None


def _is_remote(url):
    return urllib.parse.urlsplit(url).scheme.lower() in ("http", "https", "ftp")


# ---- samples ----------------------------------------------------------------------------------


def load_samples(path):
    if not os.path.isfile(path):
        raise ValueError(f"sample sheet {path!r} (config key samples): no such file")
    sheet = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    sheet.columns = [c.strip() for c in sheet.columns]
    for column in ("sample", "fq1"):
        if column not in sheet.columns:
            raise ValueError(f"sample sheet {path}: no column {column!r} (columns are sample, fq1, fq2)")
    sheet = sheet.apply(lambda col: col.str.strip())
    if sheet.empty:
        raise ValueError(f"sample sheet {path}: no samples")
    for name in sheet["sample"]:
        check_name(f"sample sheet {path}: sample", name)
    dup = sheet["sample"][sheet["sample"].duplicated()].tolist()
    if dup:
        raise ValueError(f"sample sheet {path}: sample {dup[0]!r} appears more than once")
    if "fq2" not in sheet.columns:
        sheet["fq2"] = ""
    for column in ("fq1", "fq2"):
        remote = sheet.loc[sheet[column].map(_is_remote), "sample"].tolist()
        if remote:
            raise ValueError(
                f"sample sheet {path}: sample {remote[0]!r}: reads from URLs are not supported yet "
                f"(download the FASTQ and give its path in {column})"
            )
    same = sheet.loc[sheet["fq2"] == sheet["fq1"], "sample"].tolist()
    if same:
        raise ValueError(f"sample sheet {path}: sample {same[0]!r} has the same file as fq1 and fq2")
    validate(sheet, "../schemas/samples.schema.yaml")
    return sheet.set_index("sample", drop=False)


samples = load_samples(config["samples"])


wildcard_constraints:
    sample=NAME_RE,
    name=NAME_RE,
    k=r"\d+",
    chunk=r"\d+",


# ---- per-stage values -------------------------------------------------------------------------

# Source hash of the gpualign modules each rule's script imports (and what they import).
CODE = {
    rule_name: source_hash(*modules, package_dir=str(Path(REPO, "gpualign")))
    for rule_name, modules in {
        "mask_reference": ["reference"],
        "pack_reference": ["genome"],
        "index_reference": ["genome", "index"],
        "align": ["mapper", "fastq", "bamout", "genome", "index", "reads", "params", "atomic", "errors", "gpus",
                  "pairing"],
        "split_reads": ["chunks"],
        "merge_chunks": ["chunks"],
        "bam": ["bam"],
    }.items()
}


def remote_reference_url():
    """The reference URL when it is a network one; a local reference is an input instead."""
    return "" if get_reference_source(None) else config["reference"]["url"]


def input_mem_mb(factor, extra_mb=0, floor_mb=1000):
    """mem_mb of a job holding about `factor` times its input in memory (a rough, safe estimate)."""
    return lambda wildcards, input: max(floor_mb, int(factor * input.size_mb + extra_mb))


CHUNKS = config["align"]["chunks"]


def align_params():
    """params of align and align_chunk: what changes their BAM (threads do not)."""
    return {
        "backend": config["align"]["backend"],
        "mapping": MAP_PARAMS,
        "compression_level": config["bam"]["compression_level"],
        "read_group": lambda wildcards: {"ID": wildcards.sample, "SM": wildcards.sample, "PL": "ILLUMINA"},
        "paired": lambda wildcards: is_paired(wildcards.sample),
        "code": CODE["align"],
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


def is_paired(sample):
    return samples.loc[sample, "fq2"] != ""


def get_fastq(wildcards):
    """The sample's FASTQ: {reads: fq1}, plus {mates: fq2} for paired-end reads."""
    files = {"reads": samples.loc[wildcards.sample, "fq1"]}
    if is_paired(wildcards.sample):
        files["mates"] = samples.loc[wildcards.sample, "fq2"]
    return files


def get_final_output():
    out = []
    for sample in samples["sample"]:
        out += [
            f"results/bam/{sample}.bam",
            f"results/bam/{sample}.bam.bai",
            f"results/stats/{sample}.flagstat.txt",
            f"results/stats/{sample}.idxstats.txt",
            f"results/stats/{sample}.summary.tsv",
        ]
    return out
