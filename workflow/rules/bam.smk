# Sorted BAM: coordinate order, BGZF at bam.compression_level on bam.sort_threads threads, + .bai.


rule sort_bam:
    input:
        "results/align/{sample}.unsorted.bam",
    output:
        bam="results/bam/{sample}.bam",
        bai="results/bam/{sample}.bam.bai",
    log:
        "logs/bam/{sample}.sort.log",
    params:
        compression_level=config["bam"]["compression_level"],
        code=CODE["bam"],
    threads: config["bam"]["sort_threads"]
    resources:
        mem_mb=lambda wildcards, threads: 1024 + 768 * threads,
    conda:
        "../../envs/samtools.yaml"
    script:
        "../scripts/sort_bam.py"
