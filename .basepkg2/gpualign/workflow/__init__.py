"""Helpers the Snakemake rules call, not the aligner: chunks (cut a unit's reads into chunks between
insert-size blocks, merge the chunk BAMs) and gpus (each align job claims a GPU of its own)."""
