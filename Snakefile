# gpualign: FASTQ -> sorted, indexed BAM with the GPU short-read aligner (CPU fallback).
#
#   snakemake --cores 4                       # the bundled demo, settings in config.yaml
#   snakemake --cores 16 --resources gpu=1    # one GPU job at a time (the default profile's cap)
#   snakemake --profile workflow/profiles/slurm
#
# Stages, one rule file each: reference (download, mask, pack) -> index -> reads (encode)
# -> align -> bam (sort, index) -> report (stats). See workflow/rules/*.smk.

from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/reference.smk"
include: "workflow/rules/index.smk"
include: "workflow/rules/reads.smk"
include: "workflow/rules/align.smk"
include: "workflow/rules/bam.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        get_final_output(),
    default_target: True
