# k-mer index: hash bins of every N-free k-mer of the genome image. k is part of the file name,
# so indexes for several k live side by side and switching k back reuses the old one.


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
        k=lambda wildcards: int(wildcards.k),
        max_occ=config["index"]["max_occ"],
        code=script_code("index_reference.py"),
    threads: 1
    resources:
        # 12 bytes a genome position while sorting (the input packs 4 bases a byte), 8 a bin
        mem_mb=lambda wildcards, input: max(1000, int(64 * input.size_mb + 8 * 4 ** int(wildcards.k) / 2**20)),
    conda:
        "../../envs/gpualign.yaml"
    script:
        "../scripts/index_reference.py"
