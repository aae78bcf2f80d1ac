# Statistics of each sorted BAM: samtools flagstat, idxstats and stats (MultiQC reads all three), and a one-row
# mapping summary (records, primary = reads, mapped, mapped_pct, mapq_ge_20) that `snakemake --report` shows.


rule stats:
    input:
        bam="results/bam/{sample}.bam",
        bai="results/bam/{sample}.bam.bai",
    output:
        flagstat=report(
            "results/stats/{sample}.flagstat.txt",
            category="Mapping",
            subcategory="{sample}",
            labels={"sample": "{sample}", "table": "flagstat"},
        ),
        idxstats="results/stats/{sample}.idxstats.txt",
        samtools_stats="results/stats/{sample}.samtools_stats.txt",
        summary=report(
            "results/stats/{sample}.summary.tsv",
            category="Mapping",
            subcategory="{sample}",
            labels={"sample": "{sample}", "table": "summary"},
        ),
    log:
        "logs/stats/{sample}.log",
    params:
        code=script_code("stats.py"),
    threads: 1
    resources:
        mem_mb=1024,
    conda:
        "../../envs/samtools.yaml"
    script:
        "../scripts/stats.py"
