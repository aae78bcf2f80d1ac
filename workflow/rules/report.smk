# Quality control of each sample's sorted BAM, and what `snakemake --report report.html` shows.
#
#   stats               BAM -> samtools flagstat, idxstats, stats (with the reference: mismatches per
#                       cycle), a one-row mapping summary and the depth along the contigs in bins
#   map_summary         the units' gpualign map summaries -> the sample's (JSON) and a MultiQC table
#   plots               -> MAPQ, coverage, mismatches and indels by cycle, duplication, throughput (PNG)
#   plot_insert_sizes   -> insert sizes (samples with pairs only)
#   multiqc             every sample's QC files -> MultiQC's report (qc.multiqc, off by default)
#
# The histograms come from samtools' C passes over the BAM (gpualign.qc.samtools reads them back),
# never from a Python loop over its records. The report's files are tagged with report(): category
# Mapping (tables) or Plots, a subcategory per sample, labels, and a caption each (workflow/report/).


rule stats:
    input:
        unpack(get_reference_fasta),
        bam="results/bam/{sample}.bam",
        bai="results/bam/{sample}.bam.bai",
    output:
        flagstat=report(
            "results/stats/{sample}.flagstat.txt",
            caption="../report/flagstat.rst",
            category="Mapping",
            subcategory="{sample}",
            labels={"sample": "{sample}", "table": "flagstat"},
        ),
        idxstats="results/stats/{sample}.idxstats.txt",
        samtools_stats="results/stats/{sample}.samtools_stats.txt",
        summary=report(
            "results/stats/{sample}.summary.tsv",
            caption="../report/summary.rst",
            category="Mapping",
            subcategory="{sample}",
            labels={"sample": "{sample}", "table": "summary"},
        ),
        coverage="results/stats/{sample}.coverage.tsv",
    log:
        "logs/stats/{sample}.log",
    params:
        coverage_bins=config["qc"]["coverage_bins"],
        code=script_code("stats.py"),
    threads: 1
    resources:
        mem_mb=1024,
    conda:
        "../../envs/samtools.yaml"
    script:
        "../scripts/stats.py"


rule map_summary:
    input:
        unpack(get_map_summaries),
    output:
        summary="results/stats/{sample}.map.json",
        table=report(
            "results/stats/{sample}.map_summary_mqc.tsv",
            caption="../report/map_summary.rst",
            category="Mapping",
            subcategory="{sample}",
            labels={"sample": "{sample}", "table": "gpualign map"},
        ),
    log:
        "logs/map_summary/{sample}.log",
    params:
        code=script_code("map_summary.py"),
    threads: 1
    resources:
        mem_mb=500,
    conda:
        "../../envs/samtools.yaml"
    script:
        "../scripts/map_summary.py"


rule plots:
    input:
        samtools_stats="results/stats/{sample}.samtools_stats.txt",
        flagstat="results/stats/{sample}.flagstat.txt",
        coverage="results/stats/{sample}.coverage.tsv",
        summary="results/stats/{sample}.map.json",
    output:
        mapq=report(
            "results/plots/{sample}/mapq.png",
            caption="../report/mapq.rst",
            category="Plots",
            subcategory="{sample}",
            labels={"sample": "{sample}", "plot": "MAPQ"},
        ),
        coverage=report(
            "results/plots/{sample}/coverage.png",
            caption="../report/coverage.rst",
            category="Plots",
            subcategory="{sample}",
            labels={"sample": "{sample}", "plot": "coverage"},
        ),
        errors=report(
            "results/plots/{sample}/errors.png",
            caption="../report/errors.rst",
            category="Plots",
            subcategory="{sample}",
            labels={"sample": "{sample}", "plot": "mismatches and indels"},
        ),
        duplicates=report(
            "results/plots/{sample}/duplicates.png",
            caption="../report/duplicates.rst",
            category="Plots",
            subcategory="{sample}",
            labels={"sample": "{sample}", "plot": "duplication"},
        ),
        throughput=report(
            "results/plots/{sample}/throughput.png",
            caption="../report/throughput.rst",
            category="Plots",
            subcategory="{sample}",
            labels={"sample": "{sample}", "plot": "throughput"},
        ),
    log:
        "logs/plots/{sample}.log",
    params:
        duplicates_marked=marks_duplicates(),
        code=script_code("plots.py"),
    threads: 1
    resources:
        mem_mb=1000,
    conda:
        "../../envs/report.yaml"
    script:
        "../scripts/plots.py"


rule plot_insert_sizes:
    input:
        samtools_stats="results/stats/{sample}.samtools_stats.txt",
        summary="results/stats/{sample}.map.json",
    output:
        report(
            "results/plots/{sample}/insert_sizes.png",
            caption="../report/insert_sizes.rst",
            category="Plots",
            subcategory="{sample}",
            labels={"sample": "{sample}", "plot": "insert sizes"},
        ),
    log:
        "logs/plot_insert_sizes/{sample}.log",
    params:
        code=script_code("plot_insert_sizes.py"),
    threads: 1
    resources:
        mem_mb=1000,
    conda:
        "../../envs/report.yaml"
    script:
        "../scripts/plot_insert_sizes.py"


rule multiqc:
    input:
        [path for sample in samples["sample"] for path in sample_qc_files(sample)],
    output:
        report="results/multiqc/multiqc_report.html",
        data=directory("results/multiqc/multiqc_data"),
    log:
        "logs/multiqc.log",
    params:
        code=script_code("multiqc.py"),
    threads: 1
    resources:
        mem_mb=2000,
    conda:
        "../../envs/multiqc.yaml"
    script:
        "../scripts/multiqc.py"
