"""Output records and the files that hold them (sam.py beside it: the FLAG bits, read group and
header they all build on):

    records.py      a batch's record fields (flags, mate fields, TLEN) and MD/NM, computed once;
                    its BAM records encoded as bytes by numba (batch_bam_records)
    sam_records.py  the same records as pysam objects, for SAM text (batch_records)
    bgzf.py         BGZF blocks compressed on threads, BamWriter (header + records)
    sort.py         the sinks: UnsortedBam (read order), SortedBam (coordinate order, + .bai)
    markdup.py      duplicate marking decided on per-record arrays as SortedBam writes; Picard metrics
    optical.py      optical duplicates: flow-cell places from Illumina read names, clustered as Picard
    merge.py        sorted BAMs merged into one (the workflow's chunks and units), duplicates marked
                    across them as it is written
    bai.py          bin numbers (reg2bin) and the .bai index built while the sorted BAM is written
    stats.py        flagstat, idxstats, samtools stats and the mapping summary of a finished BAM (stage stats)
"""
