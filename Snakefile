# gpualign: FASTQ -> sorted, indexed BAM with the GPU short-read aligner (CPU fallback).
#
#   snakemake --cores 4 --resources gpu=1                  # the bundled demo (config.yaml)
#   snakemake --profile workflow/profiles/slurm             # SLURM cluster
#
# The local profile workflow/profiles/default (all cores, one GPU job at a time) is loaded
# automatically through the top-level link profiles -> workflow/profiles, where Snakemake looks.
#
# Stages, one rule file each: reference (download, mask, pack) -> index -> align (reads encoded,
# mapped and written as a sorted, indexed BAM, streamed in one job) -> report (stats, plots).
# See workflow/rules/*.smk. After a run, `snakemake --report report.html` writes the report.

from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/reference.smk"
include: "workflow/rules/index.smk"
include: "workflow/rules/align.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        get_final_output(),
    default_target: True
