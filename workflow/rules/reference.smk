# Reference: fetch (any URL or path, checksums, retries) -> mask (canonical upper-case ACGTN,
# N runs as BED, contig table) -> pack (the 2-bit genome image every later stage memory-maps).


rule download_reference:
    input:
        get_reference_source,
    output:
        "resources/reference/{name}.fa.gz",
    log:
        "logs/reference/{name}.download.log",
    params:
        url=remote_reference_url(),
        sha256=config["reference"]["sha256"],
        md5=config["reference"]["md5"],
    threads: 1
    resources:
        mem_mb=512,
    conda:
        "../../envs/gpualign.yaml"
    script:
        "../scripts/download_reference.py"


rule mask_reference:
    input:
        "resources/reference/{name}.fa.gz",
    output:
        fa="resources/reference/{name}.fa",
        fai="resources/reference/{name}.fa.fai",
        bed="resources/reference/{name}.nmask.bed",
        contigs="resources/reference/{name}.contigs.tsv",
    log:
        "logs/reference/{name}.mask.log",
    params:
        code=script_code("mask_reference.py"),
    threads: 1
    resources:
        mem_mb=input_mem_mb(16),
    conda:
        "../../envs/gpualign.yaml"
    script:
        "../scripts/mask_reference.py"


rule pack_reference:
    input:
        "resources/reference/{name}.fa",
    output:
        packed="resources/reference/{name}.2bit.npy",
        nmask="resources/reference/{name}.nmask.npy",
    log:
        "logs/reference/{name}.pack.log",
    params:
        code=script_code("pack_reference.py"),
    threads: 1
    resources:
        mem_mb=input_mem_mb(16),
    conda:
        "../../envs/gpualign.yaml"
    script:
        "../scripts/pack_reference.py"
