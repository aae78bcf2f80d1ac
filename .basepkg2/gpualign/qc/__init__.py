"""Quality control of a sample's alignments, for MultiQC and `snakemake --report`.

- map_summary: what `gpualign map` did (--summary JSON), combined per sample, as a MultiQC table
- samtools: samtools stats and flagstat read back into histograms and rates
- coverage: depth along the contigs in bins (samtools bedcov)
- plots: the report's matplotlib figures, one function each
"""
