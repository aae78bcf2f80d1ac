"""Backends: where the per-read stages run. `cpu` (numba prange loops) and `cuda` (numba.cuda
kernels) provide the same functions with the same signatures, and run the same per-read code of
seed.py and extend.py, so their records are identical. A backend module provides:

    NAME                                   'cpu' or 'cuda'
    RESEED_CHUNK                           reads re-seeded per candidate_stage call (bounds scratch)
    prepare_reads(reads) -> reads          a batch as the stages take it: the reader leaves reads.DERIVED
                                           out, the cpu backend makes them on the host, cuda on the GPU
    exact_stage(reads, genome, index, p) -> (counts[n], keys[n, max_exact])
    candidate_stage(reads, sel, index, p) -> (ncand[m], keys[m, c], votes[m, c], dropped[m])
    extend_stage(reads, genome, pair_read, pair_key, p) -> ext[pairs, EXT_COLUMNS] (extend.py's columns)
    traceback_stage(reads, genome, rows, key, local, p) -> (ops, lens, trace[rows, TR_COLUMNS], md)
                                           md: the rows' MD and NM (md.MdNm's fields), made beside the
                                           traceback so that the BAM encoder only copies them
    rescue_stage(reads, genome, task_read, task_strand, task_start, task_len, p) -> found[tasks, 3]

and may provide, as optional abilities the mapper asks for with getattr:

    BATCHES_IN_FLIGHT   batches mapped at once on threads of their own (default 1)
    single_end_batch(reads, genome, index, p, rg=None, alignments=True) -> (key, local, score, sub, mapq, ops,
                        lens, trace, md, mapped, records): mapper.map_batch's whole chain kept in the backend's
                        memory (cuda: resident.py); without it the mapper calls the stages above one by one.
                        With rg (BAM output: the read group ID's bytes) records are the batch's BAM records as
                        bam/records.py makes them ((bytes, offsets, sort keys); None where not made); with
                        alignments False as well, ops, lens, trace and md may be None
    candidates_and_choice(reads, genome, index, p) -> (exact counts, (read, key, start, ext), unseen,
                        (eff, raw, loc, span, keep), (key, local, score, sub, mapq)): the same for
                        paired batches, up to the single-end choice the pairing starts from

`get_backend` is the one place that picks a module, and hands it out behind `Checked`, which checks
what each stage is given. Launch configuration (threads per block) is in launch.py.
"""

import numpy as np

from ..errors import InputError


def _check(ok: bool, stage: str, what: str):
    if not ok:
        raise ValueError(f"{stage}: {what}")


def _rows(stage: str, n_reads: int, read, *same_length):
    """Read indices in range, and the arrays beside them one entry per index."""
    read = np.asarray(read)
    _check(read.ndim == 1 and read.dtype.kind in "iu", stage,
           f"read indices must be a 1-d integer array, not {read.dtype} {read.shape}")
    _check(not len(read) or (read.min() >= 0 and read.max() < n_reads), stage,
           f"read indices outside 0..{n_reads - 1}")
    for arr in same_length:
        _check(len(arr) == len(read), stage, f"{len(arr)} entries beside {len(read)} read indices")


class Checked:
    """A backend module behind checks of what each stage is given (index k, read indices in range,
    arrays of one length): a wrong call fails here with a message, not as an out-of-bounds read in a
    kernel. Everything else (NAME, BATCHES_IN_FLIGHT, ...) is the module's, read when asked."""

    def __init__(self, module):
        self.module = module

    def __getattr__(self, name):
        return getattr(self.module, name)

    def exact_stage(self, reads, genome, index, p):
        _check(reads.k == index.k, "exact_stage", f"reads encoded with k={reads.k}, index k={index.k}")
        return self.module.exact_stage(reads, genome, index, p)

    def candidate_stage(self, reads, sel, index, p):
        _check(reads.k == index.k, "candidate_stage", f"reads encoded with k={reads.k}, index k={index.k}")
        _rows("candidate_stage", len(reads), sel)
        return self.module.candidate_stage(reads, sel, index, p)

    def extend_stage(self, reads, genome, pair_read, pair_key, p):
        _rows("extend_stage", len(reads), pair_read, pair_key)
        return self.module.extend_stage(reads, genome, pair_read, pair_key, p)

    def traceback_stage(self, reads, genome, sel_read, sel_key, sel_local, p):
        _rows("traceback_stage", len(reads), sel_read, sel_key, sel_local)
        return self.module.traceback_stage(reads, genome, sel_read, sel_key, sel_local, p)

    def rescue_stage(self, reads, genome, task_read, task_strand, task_start, task_len, p):
        _rows("rescue_stage", len(reads), task_read, task_strand, task_start, task_len)
        _check(not len(task_start) or (task_start.min() >= 0 and (task_start + task_len).max() <= genome.size),
               "rescue_stage", "a window outside the genome")
        return self.module.rescue_stage(reads, genome, task_read, task_strand, task_start, task_len, p)


def get_backend(name: str, log=None) -> Checked:
    """The backend for 'cpu', 'cuda' or 'auto' (cuda when a GPU is usable), its stages checked."""
    return Checked(_backend_module(name, log))


def _backend_module(name: str, log=None):
    from . import cpu
    if name == "cpu":
        return cpu
    from numba.core import config as nbconfig
    if nbconfig.ENABLE_CUDASIM:   # the simulator counts as available; auto must never pick it (tests name it)
        from numba import cuda as nbcuda
        available = nbcuda.is_available() and name == "cuda"
    else:                         # asked of the driver: importing numba.cuda costs most of a second
        from .. import cuda_driver as driver
        available = driver.available()
    if name == "cuda":
        if not available:
            raise InputError("backend cuda: no usable CUDA GPU found (use --backend auto or cpu)")
        from . import cuda
        return cuda
    if name != "auto":
        raise InputError(f"backend {name!r}: must be auto, cuda or cpu")
    if available:
        from . import cuda
        return cuda
    if log:
        log("backend auto: no CUDA GPU available, falling back to the CPU backend")
    return cpu
