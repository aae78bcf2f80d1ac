# Reads: FASTQ(.gz) -> 2-bit reads, reverse complements, qualities and header bins (for index.k).


rule encode_reads:
    input:
        get_fastq,
    output:
        "results/reads/{sample}.reads.npz",
    log:
        "logs/reads/{sample}.log",
    params:
        k=K,
        code=CODE["encode_reads"],
    threads: 1
    resources:
        mem_mb=input_mem_mb(24),
    conda:
        "../../envs/gpualign.yaml"
    script:
        "../scripts/encode_reads.py"
