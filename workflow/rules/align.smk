# Align: genome image + index + FASTQ(.gz) -> coordinate-sorted BAM + .bai, one per unit (a row of
# the sample sheet), then a sample's unit BAMs merged into one.
#
# Reads are encoded (stage reads, gpualign.fastq) and the BAM sorted (gpualign.bamout) inside the
# align job, streamed batch by batch: an intermediate file of the whole encoded read set, or a
# separate `samtools sort` pass, would cost more than the alignment itself. Host memory is the
# batches in flight plus 16 bytes per read for the sort; GPU memory is bounded by align.batch_size.
#
# Units: each unit (a lane, a library: the sheet's column unit) is aligned as its own job with its
# own read group (ID sample.unit, SM, LB, PL, PU) into results/units/{sample}/{unit}.bam, kept (not
# temporary) so a unit added to the sheet later is the only one aligned; merge_units merges a
# sample's units into results/bam/{sample}.bam (a sample of one unit: a hard link, or a copy).
# A unit is paired (fq2 in its row) or single-end whatever the sample's other units are.
#
# With align.chunks = N > 1 a unit's reads are split into N chunks of consecutive records
# (split_reads; paired reads as interleaved mates, cut between insert-size blocks), each aligned as
# its own job (align_chunk: on its own GPU, or its own cluster node), and the sorted chunk BAMs
# merged (merge_chunks) into the unit's BAM: the same records, in the same order, as the unsplit
# run. A failed chunk is rerun alone; the chunks that finished are kept.
#
# Align jobs ask for one `gpu` resource unless align.backend is cpu: with `auto` they use a GPU
# whenever one is visible, so they are scheduled like GPU jobs (locally `--resources gpu=N` caps
# concurrent GPU jobs; on SLURM it becomes a GPU request). Each job claims a GPU of its own on the
# host (gpualign.gpus; Snakemake does not set CUDA_VISIBLE_DEVICES), so gpu=N runs N jobs on N GPUs.

if CHUNKS == 1:

    rule align:
        input:
            unpack(get_genome),
            unpack(get_fastq),
            index=get_index,
        output:
            bam="results/units/{sample}/{unit}.bam",
            bai="results/units/{sample}/{unit}.bam.bai",
        log:
            "logs/align/{sample}.{unit}.log",
        params:
            **align_params(),
        threads: config["align"]["threads"]
        resources:
            gpu=align_gpus(),
            cpus_per_gpu=lambda wildcards, threads: threads,   # SLURM: the job's threads beside its GPU
            mem_mb=input_mem_mb(2, extra_mb=4000),
        conda:
            "../../envs/gpualign.yaml"
        script:
            "../scripts/align.py"

else:

    rule split_reads:
        input:
            unpack(get_fastq),
        output:
            temp(expand("results/chunks/{{sample}}/{{unit}}/part{chunk}.fq", chunk=range(CHUNKS))),
        log:
            "logs/split_reads/{sample}.{unit}.log",
        params:
            code=CODE["split_reads"],
        threads: config["align"]["threads"]
        resources:
            mem_mb=1000,
        conda:
            "../../envs/gpualign.yaml"
        script:
            "../scripts/split_reads.py"

    rule align_chunk:
        input:
            unpack(get_genome),
            index=get_index,
            reads="results/chunks/{sample}/{unit}/part{chunk}.fq",
        output:
            bam=temp("results/chunks/{sample}/{unit}/part{chunk}.bam"),
        log:
            "logs/align/{sample}.{unit}.part{chunk}.log",
        params:
            **align_params(),
        threads: config["align"]["threads"]
        resources:
            gpu=align_gpus(),
            cpus_per_gpu=lambda wildcards, threads: threads,   # SLURM: the job's threads beside its GPU
            mem_mb=input_mem_mb(2, extra_mb=4000),
        conda:
            "../../envs/gpualign.yaml"
        script:
            "../scripts/align.py"

    rule merge_chunks:
        input:
            expand("results/chunks/{{sample}}/{{unit}}/part{chunk}.bam", chunk=range(CHUNKS)),
        output:
            bam="results/units/{sample}/{unit}.bam",
            bai="results/units/{sample}/{unit}.bam.bai",
        log:
            "logs/merge_chunks/{sample}.{unit}.log",
        params:
            compression_level=config["bam"]["compression_level"],
            code=CODE["merge_chunks"],
        threads: config["align"]["threads"]
        resources:
            mem_mb=2000,
        conda:
            "../../envs/gpualign.yaml"
        script:
            "../scripts/merge_chunks.py"


rule merge_units:
    input:
        unpack(get_unit_bams),
    output:
        bam="results/bam/{sample}.bam",
        bai="results/bam/{sample}.bam.bai",
    log:
        "logs/merge_units/{sample}.log",
    params:
        units=lambda wildcards: sample_units(wildcards.sample),
        compression_level=config["bam"]["compression_level"],
        code=CODE["merge_units"],
    threads: config["align"]["threads"]
    resources:
        mem_mb=2000,
    conda:
        "../../envs/gpualign.yaml"
    script:
        "../scripts/merge_units.py"
