# Align: genome image + index + FASTQ(.gz) -> coordinate-sorted BAM + .bai, in one job.
#
# Reads are encoded (stage reads, gpualign.fastq) and the BAM sorted (gpualign.bamout) inside this
# job, streamed batch by batch: an intermediate file of the whole encoded read set, or a separate
# `samtools sort` pass, would cost more than the alignment itself. Host memory is the batches in
# flight plus 16 bytes per read for the sort; GPU memory is bounded by align.batch_size.
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
        reads=get_fastq,
    output:
        bam="results/bam/{sample}.bam",
        bai="results/bam/{sample}.bam.bai",
    log:
        "logs/align/{sample}.log",
    params:
        backend=config["align"]["backend"],
        mapping=MAP_PARAMS,
        compression_level=config["bam"]["compression_level"],
        read_group=lambda wildcards: {"ID": wildcards.sample, "SM": wildcards.sample, "PL": "ILLUMINA"},
        code=CODE["align"],
    threads: config["align"]["threads"]
    resources:
        gpu=align_gpus(),
        mem_mb=input_mem_mb(2, extra_mb=4000),
    conda:
        "../../envs/gpualign.yaml"
    script:
        "../scripts/align.py"
