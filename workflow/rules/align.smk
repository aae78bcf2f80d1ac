# Align: genome image + index + FASTQ(.gz) -> coordinate-sorted BAM + .bai, one per unit (a row of
# the sample sheet), then a sample's unit BAMs merged into one.
#
# Reads are encoded (stage reads, gpualign.fastq) and the BAM sorted (gpualign.bam.sort) inside the
# align job, streamed batch by batch: an intermediate file of the whole encoded read set, or a
# separate `samtools sort` pass, would cost more than the alignment itself. Host memory is the
# batches in flight plus 16 bytes per read for the sort; GPU memory is bounded by align.batch_size.
#
# Units: each unit (a lane, a library: the sheet's column unit) is aligned with its own read group
# (ID sample.unit, SM, LB, PL, PU) into results/units/{sample}/{unit}.bam, kept (not temporary) so a
# unit added to the sheet later is the only one aligned; merge_units merges a sample's units into
# results/bam/{sample}.bam (a sample of one unit: a hard link, or a copy). A unit is paired (fq2 in
# its row) or single-end whatever the sample's other units are.
#
# Duplicates (bam.mark_duplicates) are marked as each sorted BAM is written, never by a pass of
# their own: align marks a unit's BAM (merge_chunks, when the unit is in chunks), merge_units marks the
# sample's BAM again across its units, by library (gpualign.bam.merge). Each writes Picard-style
# metrics beside its BAM; a sample's are results/stats/{sample}.duplication_metrics.txt.
#
# Chunks (Snakemake's scatter/gather, scattergather `chunk` in common.smk): with align.chunks = N > 1
# (or --set-scatter chunk=N) split_reads scatters a unit's reads into N chunks of consecutive records
# (paired reads as interleaved mates, cut between insert-size blocks), align maps each chunk as its
# own job (on its own GPU, or its own cluster node) into a temporary sorted BAM, and merge_chunks
# gathers them into the unit's BAM: the same records, in the same order, as the unsplit run. A failed
# chunk is rerun alone; the chunks that finished are kept. With one chunk, align reads the unit's
# FASTQ and writes the unit's BAM itself: no split, no merge (align_target, get_align_reads).
#
# Align jobs ask for one `gpu` resource unless align.backend is cpu: with `auto` they use a GPU
# whenever one is visible, so they are scheduled like GPU jobs (locally `--resources gpu=N` caps
# concurrent GPU jobs; on SLURM it becomes a GPU request). Each job claims a GPU of its own on the
# host (gpualign.workflow.gpus; Snakemake does not set CUDA_VISIBLE_DEVICES), so gpu=N runs N jobs on N GPUs.


rule align:
    input:
        unpack(get_genome),
        unpack(get_align_reads),
        index=get_index,
    output:
        bam=align_target(".bam"),
        bai=align_target(".bam.bai"),
        summary=align_target(".map.json"),   # gpualign map --summary: the report's throughput and insert sizes
        **align_metrics(),
    log:
        align_log(),
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


if chunked():

    rule split_reads:
        input:
            unpack(get_fastq),
        output:
            temp(scatter.chunk("results/chunks/{{sample}}/{{unit}}/{scatteritem}.fq")),
        log:
            "logs/split_reads/{sample}.{unit}.log",
        params:
            code=script_code("split_reads.py"),
        threads: config["align"]["threads"]
        resources:
            mem_mb=1000,
        conda:
            "../../envs/gpualign.yaml"
        script:
            "../scripts/split_reads.py"

    rule merge_chunks:
        input:
            bams=gather.chunk("results/chunks/{{sample}}/{{unit}}/{scatteritem}.bam"),
            summaries=gather.chunk("results/chunks/{{sample}}/{{unit}}/{scatteritem}.map.json"),
        output:
            bam="results/units/{sample}/{unit}.bam",
            bai="results/units/{sample}/{unit}.bam.bai",
            summary="results/units/{sample}/{unit}.map.json",
            **unit_metrics(),
        log:
            "logs/merge_chunks/{sample}.{unit}.log",
        params:
            compression_level=config["bam"]["compression_level"],
            mark_duplicates=marks_duplicates(),
            optical_distance=optical_distance() if marks_duplicates() else 0,
            code=script_code("merge_chunks.py"),
        threads: config["align"]["threads"]
        resources:
            mem_mb=input_mem_mb(1, extra_mb=1000, floor_mb=2000),   # arrays of ~110 bytes a record marked (a BAM record ~120)
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
        **sample_metrics(),
    log:
        "logs/merge_units/{sample}.log",
    params:
        units=lambda wildcards: sample_units(wildcards.sample),
        compression_level=config["bam"]["compression_level"],
        mark_duplicates=marks_duplicates(),
        optical_distance=optical_distance() if marks_duplicates() else 0,
        code=script_code("merge_units.py"),
    threads: config["align"]["threads"]
    resources:
        mem_mb=input_mem_mb(1, extra_mb=1000, floor_mb=2000),   # arrays of ~110 bytes a record marked (a BAM record ~120)
    conda:
        "../../envs/gpualign.yaml"
    script:
        "../scripts/merge_units.py"
