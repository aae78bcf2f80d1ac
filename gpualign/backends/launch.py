"""Launch parameters of the CUDA kernels, in one place so tests can patch them small
(forcing multi-block launches on tiny inputs in the simulator)."""

THREADS_PER_BLOCK = 128
RESCUE_THREADS = 32       # threads sharing one mate rescue's rows (cuda_kernels._rescue_block_kernel; at most 32)
RESCUE_MAX_ROWS = 64      # rows of one thread's stripe there: reads up to RESCUE_THREADS times that
SEED_BLOCK_THREADS = 64   # threads sharing a read's seeding (resident_kernels._seed_block_kernel; <= MAX_VOTE_THREADS)
MAX_VOTE_THREADS = 256    # ... the most a voting block may have (seed_block.vote_block's shared slots; compile-time)
# The first seeding of every inexact read: a block of SEED_FIRST_THREADS (<= MAX_VOTE_THREADS) threads a read, the
# read's hits in the block's shared memory where max_hits <= SHARED_MAX_HITS (resident_kernels._seed_shared_kernel; a
# compile-time size: never patch it), else in global memory, at most SEED_FIRST_BLOCKS blocks (each its own scratch).
SEED_FIRST_THREADS = 32
SEED_FIRST_BLOCKS = 4096
# ... its blocks where the hits are in shared memory, which costs nothing a block: more blocks than the GPU holds at
# once, so that the reads are dealt out finely and blocks with costly reads do not leave the others idle at the end
# (on the H200, 16384 against 4096 took 9% off the E. coli and chrX reads' seeding: bench/seed_probe.py)
SEED_SHARED_BLOCKS = 16384
SHARED_MAX_HITS = 1024
# ... but first, the reads with at most SMALL_HITS hits (and half the budget) and SMALL_SEEDS seeds a strand, in shared
# arrays of 7.7 KB a block instead of 24.7 (resident_kernels._seed_small_kernel; compile-time: never patch them): most
# reads, at about three times the blocks an SM; the rest then as above
SMALL_HITS = 256
SMALL_SEEDS = 64
# threads a read for the reads it spills (hundreds of hits each: more work to share); on the H200, one batch alone
# (bench/gpu_seed_probe.sh), 64 against 32 took the chrX reads' spilled seeding 3.26 -> 3.02 ms, E. coli's 0.145 ->
# 0.093; 128 was slower on chrX (3.47)
SEED_SPILL_THREADS = 64
SCAN_THREADS = 1024   # a tile of an exclusive scan, a block (at most SCAN_SHARED; cuda.scan_on_device)
SCAN_SHARED = 1024    # ... its shared slots, a thread each (cuda_kernels.d_tile_scan; compile-time: never patch it)
WARP = 32             # threads a record of the GPU's FASTQ parse writes with (resident_kernels._write_records_kernel,
                      # coalesced; compile-time: never patch it)
# Extension DPs (cuda_kernels._close_pairs_kernel): bands of t <= NARROW_T keep a thread's six band rows in shared
# memory, CLOSE_THREADS threads a block, at most CLOSE_BLOCKS blocks looping over the listed pairs (an H100 holds
# 132 x 6 such blocks at once). The shared rows are sized for CLOSE_SHARED_THREADS when the kernels' module is
# imported (compile-time: never patch it); tests patch CLOSE_THREADS smaller. Sized from CLOSE_THREADS itself, the
# rows were 4 wide wherever a patched test imported the module first, and a later unpatched launch of 64 threads
# ran past them (the pairing test that failed now and then, by test order).
NARROW_T = 10
CLOSE_SHARED_THREADS = 64
CLOSE_THREADS = 64
CLOSE_BLOCKS = 16384      # many more than an H200 holds at once (132 x 6): 1024 left a last partial wave, and on one
                          # batch of chrX reads 16384 took 11% off the DPs (bench/seed_probe.py)
# The traceback DPs of the rows whose ungapped test did not decide (about 4% of reads), listed
# (cuda.close_traces_on_device): blocks like the close-pairs ones, at most TRACE_BLOCKS, each thread with its own
# maxlen * (2t + 1) traceback bytes, so the bytes are bounded by the grid (206 MB at 150 bp, t = 10), not the batch.
# 1024 against 256: 13-20% less time on a batch of E. coli or chrX reads (bench/seed_probe.py).
TRACE_BLOCKS = 1024


def blocks_for(n: int) -> int:
    return max(1, (n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK)


def block_threads(threads: int, most: int, what: str) -> int:
    """threads, for a block whose shared arrays have a slot for each of at most `most` threads (a compile-time
    size); a ValueError outside 1..most."""
    if not 1 <= threads <= most:
        raise ValueError(f"{what} of {threads} threads: 1 to {most}")
    return threads
