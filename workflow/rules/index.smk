# k-mer index: hash bins of every N-free k-mer of the genome image. k is part of the file name,
# so indexes for several k live side by side and switching k back reuses the old one; k=auto is
# NAME.kauto, its k chosen by the job from the genome's size (gpualign.index.auto_k) and stored in it.


rule index_reference:
    input:
        packed="resources/reference/{name}.2bit.npy",
        nmask="resources/reference/{name}.nmask.npy",
        contigs="resources/reference/{name}.contigs.tsv",
    output:
        "resources/reference/{name}.k{k}.idx.npz",
    log:
        "logs/reference/{name}.k{k}.index.log",
    params:
        k=lambda wildcards: wildcards.k if wildcards.k == "auto" else int(wildcards.k),
        max_occ=config["index"]["max_occ"],
        code=script_code("index_reference.py"),
    threads: config["index"]["threads"]
    resources:
        mem_mb=index_mem_mb,
    conda:
        "../../envs/gpualign.yaml"
    script:
        "../scripts/index_reference.py"
