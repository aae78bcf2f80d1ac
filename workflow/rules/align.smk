# Align: genome image + index + encoded reads -> unsorted BAM (records in read order).
#
# The job asks for one `gpu` resource unless align.backend is cpu: with `auto` it will use a GPU
# whenever one is visible, so it is scheduled like a GPU job (locally `--resources gpu=N` caps
# concurrent GPU jobs; on SLURM it becomes --gpus=1). On a machine without a GPU, `auto` falls
# back to the CPU backend and says so in the log. Snakemake does not set CUDA_VISIBLE_DEVICES:
# with several GPUs on one host, keep gpu=1 there or assign devices yourself.


rule align:
    input:
        unpack(get_genome),
        index=get_index,
        reads="results/reads/{sample}.reads.npz",
    output:
        # kept (not temp) so that changing bam.* reruns sort_bam without aligning again
        "results/align/{sample}.unsorted.bam",
    log:
        "logs/align/{sample}.log",
    params:
        backend=config["align"]["backend"],
        mapping=MAP_PARAMS,
        read_group=lambda wildcards: {"ID": wildcards.sample, "SM": wildcards.sample, "PL": "ILLUMINA"},
        code=CODE["align"],
    threads: config["align"]["threads"]
    resources:
        gpu=align_gpus(),
        mem_mb=input_mem_mb(3, extra_mb=2000),
    conda:
        "../../envs/gpualign.yaml"
    script:
        "../scripts/align.py"
