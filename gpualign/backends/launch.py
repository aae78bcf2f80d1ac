"""Launch parameters of the CUDA kernels, in one place so tests can patch them small
(forcing multi-block launches on tiny inputs in the simulator)."""

THREADS_PER_BLOCK = 128
RESCUE_THREADS = 32       # threads sharing one mate rescue's rows (cuda_kernels._rescue_block_kernel; at most 32)
RESCUE_MAX_ROWS = 64      # rows of one thread's stripe there: reads up to RESCUE_THREADS times that
SEED_BLOCK_THREADS = 64   # threads sharing one read's seeding (resident_kernels._seed_block_kernel)
SCAN_THREADS = 1024   # the one block of an exclusive scan (at most 1024: its shared array)


def blocks_for(n: int) -> int:
    return max(1, (n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK)
