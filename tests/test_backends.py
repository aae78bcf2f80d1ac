"""The backends (backends/): identical alignments from cpu and cuda whatever the batch size or the
batches in flight, and the stage checks every backend is handed out behind. Each stage against its
naive reference is in test_seed.py and test_extend.py.

The CUDA backend runs in numba's simulator here (conftest.py); run with NUMBA_ENABLE_CUDASIM=0 on
a GPU machine to check the compiled kernels with these same tests.
"""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pysam
import pytest

from numba import cuda as numba_cuda

from gpualign.backends import cpu, cuda, get_backend, launch, resident, resident_kernels
from gpualign.errors import InputError
from gpualign.mapper import StageTimes, map_batch, map_reads, mapped_batches
from gpualign.options import MapParams
from gpualign.reads import derived, encode_reads, finish_reads, subset

import naive
from helpers import simulate_reads

P = MapParams(max_indels=3, max_candidates=4, max_hits=256)


@pytest.mark.parametrize("budget", [dict(max_candidates=4, max_hits=256), dict(max_candidates=1, max_hits=12),
                                    dict(max_candidates=2, max_hits=2000)])
def test_backends_and_batch_sizes_give_identical_alignments(monkeypatch, world, budget):
    """Also with budgets so small that searches are incomplete and reads are re-seeded, and so big that
    the first seeding's hits go to global memory, not shared."""
    rng, genome, seqs, index = world
    batch, _ = simulate_reads(rng, seqs, 14, length=45, n_rate=0.01)
    monkeypatch.setattr(launch, "THREADS_PER_BLOCK", 8)
    monkeypatch.setattr(launch, "SCAN_THREADS", 4)   # the resident chain's scans in several chunks
    monkeypatch.setattr(launch, "SEED_BLOCK_THREADS", 5)
    monkeypatch.setattr(launch, "SEED_FIRST_THREADS", 4)
    monkeypatch.setattr(launch, "SEED_SPILL_THREADS", 5)   # the spilled reads' blocks of another size
    monkeypatch.setattr(launch, "SEED_FIRST_BLOCKS", 3)   # a block seeds several reads in turn
    monkeypatch.setattr(launch, "SEED_SHARED_BLOCKS", 3)
    p = MapParams(max_indels=3, min_score=15, **budget)  # short noisy reads
    results = [map_batch(batch, genome, index, p, cpu), map_batch(batch, genome, index, p, cuda)]
    halves = [map_batch(subset(batch, a, b), genome, index, p, cpu) for a, b in ((0, 5), (5, len(batch)))]
    a, b = results
    for f in ("key", "local", "score", "sub", "mapq", "mapped", "trace", "ops", "lens"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    for f in a.md._fields:   # MD and NM: the cpu's beside its traceback, the GPU's in the resident chain
        assert np.array_equal(getattr(a.md, f), getattr(b.md, f)), f
    for f in ("key", "score", "sub", "mapq"):
        assert np.array_equal(getattr(a, f), np.concatenate([getattr(h, f) for h in halves])), f
    assert len(a.mapped) >= len(batch) // 2   # not a vacuous comparison


def test_batches_in_flight_on_streams_give_the_cpu_records_in_order(monkeypatch, world, tmp_path):
    """cuda maps BATCHES_IN_FLIGHT batches at once on threads with their own streams and device
    buffers; the BAM must hold the cpu backend's records, in input order."""
    rng, genome, seqs, index = world
    batch, _ = simulate_reads(rng, seqs, 40, length=50, n_rate=0.01)
    monkeypatch.setattr(launch, "THREADS_PER_BLOCK", 8)
    monkeypatch.setattr(cuda, "BATCHES_IN_FLIGHT", 3)
    monkeypatch.setattr(resident, "RESEED_BLOCKS", 2)   # a block re-seeds several reads
    monkeypatch.setattr(launch, "SEED_BLOCK_THREADS", 3)
    monkeypatch.setattr(launch, "SEED_FIRST_THREADS", 2)
    monkeypatch.setattr(launch, "SEED_SPILL_THREADS", 3)
    monkeypatch.setattr(launch, "SCAN_THREADS", 8)
    p = MapParams(max_indels=3, min_score=15, max_candidates=2, max_hits=24, batch_size=6)
    records = {}
    for name in ("cpu", "cuda"):
        out = str(tmp_path / f"{name}.bam")
        map_reads(genome, index, batch, out, p, backend_name=name, threads=2, log=lambda msg: None)
        with pysam.AlignmentFile(out, check_sq=False) as bam:
            records[name] = [r.to_string() for r in bam]
    assert records["cuda"] == records["cpu"]
    assert [r.split("\t")[0] for r in records["cpu"]] == [batch.name(i) for i in range(len(batch))]


def test_records_made_on_the_gpu_reach_the_bam_as_the_cpus(monkeypatch, world, tmp_path):
    """Single-end batches' BAM records are made on the GPU (records_on_device): sorted, with a read
    group, duplicates marked (their fields from the host) and FASTQ comments appended, the BAM holds
    the cpu backend's records; and a batch whose records overflow the GPU's buffer is encoded on the
    host instead, to the same records."""
    from gpualign.reads import encode_reads as encode
    rng, genome, seqs, index = world
    batch, (names, reads, quals) = simulate_reads(rng, seqs, 14, length=50, n_rate=0.01)
    dup = [reads[0], reads[1]]   # two duplicates of the first two reads
    batch = encode(names + [b"d0", b"d1"], reads + dup, [bytes(q + 33 for q in x) for x in quals + quals[:2]], 8,
                   comments=[b"BC:Z:%d" % i for i in range(16)])
    monkeypatch.setattr(launch, "THREADS_PER_BLOCK", 8)
    p = MapParams(max_indels=3, min_score=15, max_candidates=2, max_hits=24, batch_size=16)
    made = []
    real = resident.single_end_batch

    def watched(*args, **kwargs):
        out = real(*args, **kwargs)
        made.append(out[-1] is not None)
        return out

    monkeypatch.setattr(resident, "single_end_batch", watched)
    monkeypatch.setattr(cuda, "single_end_batch", watched)
    records = {}
    for name, capacity, markdup in (("cpu", None, True), ("cuda", None, True), ("cpu, all flags", None, False),
                                    ("overflow", 10, False)):   # without markdup only the records are kept
        if capacity:
            monkeypatch.setattr(cuda, "record_capacity", lambda *a: capacity)
        out = str(tmp_path / f"{len(records)}.bam")
        map_reads(genome, index, batch, out, p, backend_name="cpu" if name.startswith("cpu") else "cuda", threads=2,
                  read_group={"ID": "grp-1", "SM": "s"}, sort=True, markdup=markdup, log=lambda msg: None)
        with pysam.AlignmentFile(out, check_sq=False) as bam:
            records[name] = [r.to_string() for r in bam]
    assert made == [False, True, False, False]   # (a warm-up read first) made on the GPU; overflowed
    assert records["cuda"] == records["cpu"] and records["overflow"] == records["cpu, all flags"]
    assert sum("\tRG:Z:grp-1" in r and "BC:Z:" in r for r in records["cpu"]) == len(batch)
    assert sum(int(r.split("\t")[1]) & 0x400 != 0 for r in records["cpu"]) >= 1


def test_a_trace_puts_every_kernel_launch_on_the_gpu_timeline(monkeypatch, world, tmp_path):
    """With GPUALIGN_TRACE, each launch is timed by CUDA events and appears on a thread "GPU" (in the
    simulator the events' times are meaningless; the rows must be there, one per launch)."""
    rng, genome, seqs, index = world
    batch, _ = simulate_reads(rng, seqs, 12, length=50)
    monkeypatch.setattr(launch, "THREADS_PER_BLOCK", 8)
    path = tmp_path / "trace.tsv"
    monkeypatch.setenv("GPUALIGN_TRACE", str(path))
    launches = []
    real_enqueue = cuda._enqueue
    monkeypatch.setattr(cuda, "_enqueue", lambda *args: (launches.append(True), real_enqueue(*args)))
    events = []
    real_event = numba_cuda.event
    monkeypatch.setattr(numba_cuda, "event", lambda *args: (events.append(True), real_event(*args))[1])
    monkeypatch.setattr(cuda, "BATCHES_IN_FLIGHT", 1)   # batches of 4 reads in turn on one thread
    p = MapParams(max_indels=3, max_candidates=4, max_hits=256, batch_size=4)
    map_reads(genome, index, batch, str(tmp_path / "out.bam"), p, backend_name="cuda", threads=2, log=lambda msg: None)
    gpu = [line.split("\t")[1] for line in path.read_text().splitlines() if line.startswith("GPU\t")]
    assert len(gpu) == sum(launches) > 0
    assert len(events) < sum(launches)   # a thread's events are recorded again once their kernels are placed
    assert {"GPU exact_kernel", "GPU seed_shared_kernel", "GPU pairs_kernel", "GPU open_pairs_kernel",
            "GPU close_pairs_kernel", "GPU choose_kernel"} <= set(gpu)


def test_stages_are_handed_out_checked(monkeypatch, world):
    """get_backend's stages refuse calls that would read out of bounds inside a kernel, with a message;
    everything else is the module's, read when asked."""
    rng, genome, seqs, index = world
    batch, _ = simulate_reads(rng, seqs, 6, length=40)
    checked = get_backend("cpu")
    assert checked.NAME == "cpu" and checked.module is cpu
    monkeypatch.setattr(cpu, "RESEED_CHUNK", 3)
    assert checked.RESEED_CHUNK == 3
    counts, keys = checked.exact_stage(batch, genome, index, P)
    assert np.array_equal(counts, cpu.exact_stage(batch, genome, index, P)[0])
    with pytest.raises(ValueError, match="read indices outside 0..5"):
        checked.candidate_stage(batch, np.array([0, 6]), index, P)
    with pytest.raises(ValueError, match="2 entries beside 3 read indices"):
        checked.extend_stage(batch, genome, np.array([0, 1, 2]), np.array([5, 6]), P)
    with pytest.raises(ValueError, match="1-d integer array"):
        checked.traceback_stage(batch, genome, np.array([0.5]), np.array([1]), np.array([0]), P)
    with pytest.raises(ValueError, match="window outside the genome"):
        checked.rescue_stage(batch, genome, np.array([0]), np.array([0]), np.array([genome.size - 5]),
                             np.array([10]), P)
    other_k = encode_reads([b"r"], [b"ACGTACGTACGT"], [b"IIIIIIIIIIII"], index.k + 1)
    with pytest.raises(ValueError, match=f"k={index.k + 1}, index k={index.k}"):
        checked.exact_stage(other_k, genome, index, P)


def test_reads_derived_on_the_gpu_are_the_hosts(monkeypatch, rng):
    """Reverse complements, packed words and header bins made on the GPU from the codes alone (a
    thread per read, encode.derive_read) equal those reads.finish_reads makes on the host, for reads
    shorter than k, with N, and across word edges."""
    monkeypatch.setattr(launch, "THREADS_PER_BLOCK", 8)
    lengths = [0, 3, 11, 12, 15, 16, 17, 31, 32, 33, 47, 100]
    seqs = [rng.choice(np.frombuffer(letters, dtype=np.uint8), size=n).tobytes() for n in lengths
            for letters in (b"ACGT", b"ACGTN")]
    names = [f"r{i}".encode() for i in range(len(seqs))]
    host = encode_reads(names, seqs, [b"I" * len(s) for s in seqs], k=12)
    bare = finish_reads(host.names, host.name_off, host.codes, host.quals, host.read_off, 12, derive=False)
    assert bare.rc_codes is None and derived(bare).packed is not None
    fields = ("rc_codes", "packed", "rc_packed", "word_off", "hbin", "rc_hbin")
    on_gpu = cuda._read_arrays(bare, *fields)
    for f, arr in zip(fields, on_gpu):
        expected = getattr(host, f)
        assert np.array_equal(arr.copy_to_host()[:len(expected)], expected), f
    assert (host.hbin >= 0).sum() >= 8   # not a vacuous comparison: most N-free reads have a bin


@pytest.mark.parametrize("threads", [1, 3, 32])
def test_the_device_scan_gives_running_sums(monkeypatch, rng, threads):
    """cuda.scan_on_device (a tile a block, the tiles' sums scanned, each tile from its start) against
    numpy's cumsum, from an offset into the values and in place (sizes in start[1:] turned into
    offsets, as the MD offsets are), for lengths of no tile, one, a partial one and many."""
    monkeypatch.setattr(launch, "SCAN_THREADS", threads)
    for n in (0, 1, threads, threads + 1, 5 * threads + 3, 200):
        sizes = rng.integers(0, 50, size=n).astype(np.int64)
        want = np.concatenate(([0], np.cumsum(sizes)))
        values = numba_cuda.to_device(np.concatenate((rng.integers(0, 9, size=3), sizes)).astype(np.int64))
        start = numba_cuda.to_device(np.full(n + 1, -1, dtype=np.int64))
        cuda.scan_on_device(values, 3, n, start)
        cuda._stream().synchronize()
        assert np.array_equal(start.copy_to_host(), want), n
        inplace = numba_cuda.to_device(np.concatenate(([-1], sizes)).astype(np.int64))
        cuda.scan_on_device(inplace, 1, n, inplace)
        cuda._stream().synchronize()
        assert np.array_equal(inplace.copy_to_host(), want), n


@pytest.mark.parametrize("threads", [1, 3, 32])
@pytest.mark.parametrize("multi_exact", [False, True])
def test_the_resident_chains_pairs_are_candidate_pairs(monkeypatch, rng, threads, multi_exact):
    """resident_kernels._pairs_kernel (a thread a read, writing from where the scan of per-read counts
    says its pairs start) against a plain loop: kept candidates, then a single exact hit, or every
    stored exact hit of multi_exact reads; in blocks and scan tiles of several sizes."""
    monkeypatch.setattr(launch, "SCAN_THREADS", threads)
    stride, emax = 4, 3
    for n in (1, 2, threads + 1, 5 * threads + 3, 200):
        counts = rng.choice([0, 1, 2, 5], size=n).astype(np.int64)
        kept = np.where(counts < 2, rng.integers(0, stride + 1, size=n), 0).astype(np.int64)
        per_read = np.where(counts < 2, kept + (counts == 1), np.minimum(counts, emax) if multi_exact else 0)
        ekeys = rng.integers(0, 1000, size=n * emax).astype(np.int64)
        ckeys = rng.integers(0, 1000, size=n * stride).astype(np.int64)
        want_read, want_key = [], []
        for r in range(n):
            keys = list(ckeys[r * stride:r * stride + kept[r]])
            keys += [ekeys[r * emax]] if counts[r] == 1 else list(ekeys[r * emax:r * emax + per_read[r] - kept[r]])
            want_read += [r] * len(keys)
            want_key += keys
        start = numba_cuda.device_array(n + 1, dtype=np.int64)
        read = numba_cuda.device_array(max(len(want_read), 1), dtype=np.int64)
        key = numba_cuda.device_array(max(len(want_read), 1), dtype=np.int64)
        dev = [numba_cuda.to_device(a) for a in (per_read.astype(np.int64), counts, ekeys, kept, ckeys)]
        cuda.scan_on_device(dev[0], 0, n, start)
        cuda._stream().synchronize()
        resident_kernels._pairs_kernel[-(-n // threads), threads](*dev[:3], emax, *dev[3:], stride, start, read, key)
        assert np.array_equal(start.copy_to_host(), np.concatenate(([0], np.cumsum(per_read)))), n
        assert read.copy_to_host()[:len(want_read)].tolist() == want_read
        assert key.copy_to_host()[:len(want_key)].tolist() == want_key


@pytest.mark.parametrize("threads", [1, 3, 8])
@pytest.mark.parametrize("kernel", ["_seed_block_kernel", "_seed_shared_kernel", "_seed_small_kernel"])
def test_the_block_seeding_kernels_give_find_candidates_results(rng, world, threads, kernel):
    """resident_kernels' block seeding kernels (a block a read: seeds ranked by the block's threads,
    bins copied, runs merged and clusters voted by all of them; their hits in global or in shared
    memory; or the small arrays' kernel first, the reads it spills, by hits or by seeds, then seeded
    by the shared kernel) against seed.find_candidates on the host: repeat reads, N, reads shorter
    than k, a read of more seeds than the small arrays hold, budgets that bind or not, more reads than
    blocks."""
    from gpualign import seed
    _, genome, seqs, index = world
    batch, (names, reads, quals) = simulate_reads(rng, seqs, 12, length=int(rng.integers(20, 70)), sub=0.05,
                                                  n_rate=0.02)
    for o in (0, 30, 60):   # inside the repeat (seqs[0][:120] is copied at 240): many hits, two loci
        names.append(f"rep{o}".encode())
        reads.append(seqs[0][o:o + 60].encode())
        quals.append(b"I" * 60)
    names.append(b"short")
    reads.append(b"ACGTAC")   # shorter than k: no seed
    quals.append(b"IIIIII")
    long_read = seqs[0][200:200 + 8 * launch.SMALL_SEEDS + 40]   # more seeds a strand than the small arrays hold
    names.append(b"long")
    reads.append(long_read.encode())
    quals.append(b"I" * len(long_read))
    batch = derived(encode_reads(names, reads, quals, 8))
    n = len(batch)
    counts = rng.choice([0, 0, 1], size=n).astype(np.int64)
    picked = rng.permutation(n)[:n - 2].astype(np.int64)   # some reads not picked: their rows untouched
    seen_dropped = seen_many = False
    spills = set()
    for hmax, mcand, max_occ in ((10, 1, 50), (256, 4, 50), (64, 3, 6)):
        stride = mcand + 1
        want_n = np.zeros(n, np.int64)
        want_keys = np.full(n * stride, -7, np.int64)
        want_votes = np.full(n * stride, -7, np.int64)
        want_dropped = np.zeros(n, np.int64)
        for r in picked:
            s, e = batch.read_off[r], batch.read_off[r + 1]
            want_votes[r * stride:r * stride + mcand] = 0
            want_n[r] = seed.find_candidates(batch.codes, batch.rc_codes, s, e - s, 8, index.offsets, index.positions,
                                             max_occ, 3, np.zeros(seed.scratch_words(hmax), np.int64), 0, hmax, want_keys,
                                             want_votes, r * stride, mcand, want_dropped, r)
        out = {f: numba_cuda.to_device(np.full(n * (stride if f in ("keys", "votes") else 1), -7, np.int64))
               for f in ("ncand", "keys", "votes", "dropped", "kept", "per_read")}
        unseen = numba_cuda.to_device(np.full(n, -7, np.int64))
        blocks = 4
        hits = (numba_cuda.to_device(np.zeros(blocks * 2 * hmax, np.int64)),) if kernel == "_seed_block_kernel" else ()
        counts_on = numba_cuda.to_device(counts)

        def seed_with(name, todo, ntodo, *more):
            getattr(resident_kernels, name)[blocks, threads](
                todo, ntodo, batch.codes, batch.rc_codes, batch.read_off, 8, index.offsets, index.positions, max_occ,
                3, *hits, hmax, mcand, stride, 1, 5, counts_on, 4, out["ncand"], out["keys"], out["votes"],
                out["dropped"], unseen, out["kept"], out["per_read"], numba_cuda.to_device(np.zeros(1, np.int64)),
                numba_cuda.to_device(np.zeros(1, np.int64)), *more)

        todo = (numba_cuda.to_device(picked), numba_cuda.to_device(np.array([len(picked)], np.int64)))
        if kernel == "_seed_small_kernel":   # then the shared kernel on what it spilled
            spilled = numba_cuda.to_device(np.full(n, -1, np.int64))
            nspill = numba_cuda.to_device(np.zeros(1, np.int64))
            seed_with(kernel, *todo, spilled, nspill)
            spilled_reads = spilled.copy_to_host()[:nspill.copy_to_host()[0]]
            assert sorted(spilled_reads) == sorted(set(spilled_reads)) and set(spilled_reads) <= set(picked)
            assert (n - 1 in spilled_reads) == (n - 1 in picked)   # the long read, whatever its hits
            spills.add(0 < len(spilled_reads) < len(picked) - (n - 1 in picked))   # each kernel seeded some
            seed_with("_seed_shared_kernel", spilled, nspill)
        else:
            seed_with(kernel, *todo)
        got = {f: a.copy_to_host() for f, a in out.items()}
        assert np.array_equal(got["ncand"][picked], want_n[picked]), hmax
        assert np.array_equal(got["dropped"][picked], want_dropped[picked]), hmax
        want_unseen = [seed.unseen_score(want_dropped[r], want_votes[r * stride], counts[r],
                                         batch.read_off[r + 1] - batch.read_off[r], 8, 1, 5) for r in picked]
        assert unseen.copy_to_host()[picked].tolist() == want_unseen, hmax
        for r in picked:
            row = slice(r * stride, r * stride + want_n[r])
            assert got["keys"][row].tolist() == want_keys[row].tolist(), (hmax, r)
            assert got["votes"][r * stride:r * stride + mcand].tolist() == want_votes[r * stride:r * stride + mcand].tolist()
        seen_dropped |= bool(want_dropped.max() > 0)
        seen_many |= bool(want_n.max() >= 2)
        unpicked = np.setdiff1d(np.arange(n), picked)
        assert (got["ncand"][unpicked] == -7).all()
    assert seen_dropped and seen_many   # not a vacuous comparison: loci left out, several candidates kept
    assert kernel != "_seed_small_kernel" or True in spills


@pytest.mark.parametrize("threads", [1, 4, 32])
@pytest.mark.parametrize("sorter", ["sort_runs_block", "sort_runs_pass_block"])
def test_the_block_sort_of_a_reads_runs_is_a_sort(rng, threads, sorter):
    """seed_block's sorts of a read's runs (ranked at most RANK_SORT_SHARE values a thread, else merge passes
    of pairs of runs: each thread a share of each merge, or of the whole pass, crossing pairs) against
    numpy's sort, on fresh random ascending runs as a read's seeds give them: one to many runs, short and
    long ones, equal values within and across runs, in either half of the scratch."""
    from gpualign.backends import seed_block as sb
    sort_runs = getattr(sb, sorter)

    @numba_cuda.jit
    def sort(a, off, n, scratch, starts, nruns, at):
        runs = numba_cuda.shared.array(64, dtype=np.int32)
        for x in range(numba_cuda.threadIdx.x, nruns, numba_cuda.blockDim.x):
            runs[x] = starts[x]
        numba_cuda.syncthreads()
        got = sort_runs(a, off, n, scratch, runs, nruns)
        if numba_cuda.threadIdx.x == 0:
            at[0] = got

    merged = ranked = False
    for rep in range(10):
        nruns = int(rng.integers(2, 4) if rep % 4 == 1 else rng.integers(1, 40))   # a few values: ranked
        long = rep % 2 == 0
        lengths = rng.integers(1, 80 if long else 4, nruns)
        runs = [np.sort(rng.integers(0, 50 if rep % 3 == 0 else 10 ** 9, m)) for m in lengths]
        values = np.concatenate(runs).astype(np.int64)
        n = len(values)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32)
        off, scratch = (0, n) if rng.random() < 0.5 else (n, 0)
        a = np.full(2 * n, -9, np.int64)
        a[off:off + n] = values
        at = np.full(1, -1, np.int64)
        sort[1, threads](a, off, n, scratch, starts, nruns, at)
        assert at[0] in (off, scratch)
        assert a[at[0]:at[0] + n].tolist() == np.sort(values).tolist(), (nruns, n, threads)
        ranked |= nruns > 1 and n <= sb.RANK_SORT_SHARE * threads
        merged |= n > sb.RANK_SORT_SHARE * threads and nruns > 2
    assert merged and (ranked or threads == 1)


@pytest.mark.parametrize("voter", ["vote_block", "vote_block_counted"])
@pytest.mark.parametrize("slots", [launch.MAX_VOTE_THREADS, 32])
@pytest.mark.parametrize("threads", [1, 4, 32])
def test_the_block_vote_gives_the_clusters_of_a_serial_walk(rng, threads, slots, voter):
    """seed_block's votes (segments between gaps over t cut into clusters by threads of their own; then
    vote_block ranks them where they fit the shared slots, else takes the best a round by a block-wide
    maximum; vote_block_counted ranks a few, or the best found from the clusters counted by votes, else as
    vote_block) against naive.vote, a serial walk, on fresh random sorted hits: dense stretches that split
    into several clusters, equal hits, ties of votes, more or fewer clusters than kept or than the slots
    hold, none at all."""
    from gpualign.backends import seed_block as sb
    vote_hits = getattr(sb, voter)

    @numba_cuda.jit
    def vote(a, at, nh, t, fo, cand_keys, cand_votes, max_cand, dropped, ncand):
        best = numba_cuda.shared.array(slots, dtype=np.int64)
        nc = vote_hits(a, at, nh, t, fo, best, cand_keys, cand_votes, 0, max_cand, dropped, 0)
        ncand[numba_cuda.threadIdx.x] = nc

    ways = set()
    ties = False
    for rep in range(16):
        many = rep % 4 == 3   # more hits than the slots hold
        nh = int(rng.integers(slots + 10, slots + 60) if many else rng.integers(0, 60)) if rep else 60
        nh = 2 if rep == 1 else nh   # at most two clusters: ranked at once by every vote and block
        t = int(rng.integers(0, 6))
        dense = (0.1 if many else 0.5) if rep else 0.0   # the first: every hit a cluster of its own, more than 32
        gaps = np.where(rng.random(nh) < dense, rng.integers(0, t + 2, nh), rng.integers(t + 1, 40, nh))
        max_cand = int(rng.integers(0, 6))
        if rep == 7:   # more clusters than the slots, the best with more votes than the counts tell: the rounds
            sizes = rng.permutation([sb.VOTE_BINS - 1] * (max_cand + 1) + [1] * (slots + 10))
            nh = int(sizes.sum())
            gaps = np.concatenate([[int(rng.integers(t + 1, 40))] + [0] * (size - 1) for size in sizes])
        hits = np.cumsum(gaps).astype(np.int64) + 1000
        half = nh + 64 if many or rep == 7 else 64
        at, fo = (0, half) if rng.random() < 0.5 else (half, 0)   # sorted run in either half, as the sorts leave it
        a = np.full(2 * half, -9, np.int64)
        a[at:at + nh] = hits
        keys, votes = np.full(max(max_cand, 1), -7, np.int64), np.zeros(max(max_cand, 1), np.int64)
        dropped, ncand = np.full(1, -7, np.int64), np.full(threads, -7, np.int64)
        vote[1, threads](a, at, nh, t, fo, keys, votes, max_cand, dropped, ncand)
        want, want_dropped = naive.vote(hits.tolist(), t, max_cand)
        assert (ncand == len(want)).all(), (nh, t, max_cand)
        assert list(zip(keys[:len(want)].tolist(), votes[:len(want)].tolist())) == want
        assert dropped[0] == want_dropped
        assert a[at:at + nh].tolist() == hits.tolist()   # the sorted hits are left as they were
        every = sorted((v for _, v in naive.vote(hits.tolist(), t, nh + 1)[0]), reverse=True)
        threshold = every[max_cand] if max_cand < len(every) else 0   # the best left out's votes
        counted = voter == "vote_block_counted" and 0 < threshold < sb.VOTE_BINS - 1 and max_cand < slots
        few = len(every) <= slots and (voter == "vote_block" or len(every) <= 2 * threads or not counted)
        ways.add("all ranked" if few else "the best ranked" if counted else "rounds")
        ties |= counted and every.count(threshold) > every.index(threshold) + 1 - max_cand   # some ties left out
    if voter == "vote_block":
        assert ways == {"all ranked", "rounds"}, ways
    else:
        assert ways == {"all ranked", "the best ranked", "rounds"} and ties, ways


@pytest.mark.parametrize("fails", ["warm_up", "record_slices"])
def test_a_failed_run_leaves_no_thread_reading(monkeypatch, world, tmp_path, fails):
    """map_reads failing before the first batch (the backend's warm-up) or while it writes records
    stops the threads that read and map batches before the error leaves it: a reading thread still
    decoding when the interpreter exits aborts the process (rapidgzip's C++ exceptions), so the
    error's one line became a core dump."""
    from gpualign import mapper
    rng, genome, seqs, index = world
    batch, _ = simulate_reads(rng, seqs, 40, length=50)
    monkeypatch.setattr(cpu, "BATCHES_IN_FLIGHT", 2, raising=False)   # batches fed from a thread of their own

    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(mapper, fails, boom)
    reading = lambda: [t for t in threading.enumerate() if t.name.endswith("(produce)")]  # noqa: E731
    before = set(reading())
    p = MapParams(max_indels=3, min_score=15, batch_size=2)   # 20 batches: the reader waits on a full queue
    with pytest.raises(RuntimeError, match="boom"):
        map_reads(genome, index, batch, str(tmp_path / "out.bam"), p, backend_name="cpu", threads=2,
                  log=lambda msg: None)
    assert [t for t in reading() if t not in before] == []


def test_batches_keep_mapping_while_the_caller_is_busy(monkeypatch, world):
    """mapped_batches feeds the map threads from a thread of its own, with batches queued behind the
    busy ones: while the caller still holds the first result (writing its records), later batches
    go on being mapped, and the results still come in input order."""
    rng, genome, seqs, index = world
    batch, _ = simulate_reads(rng, seqs, 12, length=50)
    monkeypatch.setattr(launch, "THREADS_PER_BLOCK", 8)
    monkeypatch.setattr(cuda, "BATCHES_IN_FLIGHT", 2)
    started = []
    prepare = cuda.prepare_reads
    monkeypatch.setattr(cuda, "prepare_reads", lambda b: started.append(b.name(0)) or prepare(b))
    batches = [subset(batch, i, i + 2) for i in range(0, 12, 2)]
    results = mapped_batches(iter(batches), genome, index, MapParams(max_indels=3, min_score=15), cuda, StageTimes())
    first, _ = next(results)
    deadline = time.monotonic() + 60
    while len(started) < 5 and time.monotonic() < deadline:   # the caller is busy with the first result
        time.sleep(0.05)
    assert len(started) >= 5   # fed one at a time by the caller, two would have started
    rest = [b for b, _ in results]
    assert [b.name(0) for b in [first, *rest]] == [b.name(0) for b in batches]


# ---- the GPU's memory: batches planned to fit it ---------------------------------------------------

def kept_device_buffers(run):
    """{slot: bytes} of the device buffers a fresh mapping thread keeps after run() (cuda._local is
    per thread: a new thread starts with none)."""
    out = {}

    def body():
        run()
        out.update({slot: buf.nbytes for slot, (buf, _) in cuda._local.device.slots.items()})
    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    return out


@pytest.mark.parametrize("paired, raw", [(False, False), (False, True), (True, False)])
def test_the_memory_model_covers_every_buffer_a_batch_keeps(monkeypatch, world, paired, raw):
    """resident.device_slots names every device buffer a mapped batch leaves kept and is at least its
    size (buffers a quarter larger, as cuda.kept_bytes makes them; the smallest-buffer floor off, so
    small batches measure the model), and not far above it for the buffers that scale with reads;
    also for a raw batch parsed on the GPU, with its BAM records made there."""
    from gpualign.fastq import RawReads
    from gpualign.mapper import map_pair_batch
    from helpers import simulate_pairs
    rng, genome, seqs, index = world
    monkeypatch.setattr(launch, "THREADS_PER_BLOCK", 8)
    monkeypatch.setattr(cuda, "MIN_BUFFER", 1)
    if paired:
        batch, _ = simulate_pairs(rng, seqs, 40, length=50, insert=(250, 25))
        p = MapParams(max_indels=3, min_score=15, max_candidates=4, max_hits=64)
        kept = kept_device_buffers(lambda: map_pair_batch(batch, genome, index, p, cuda))
    else:
        batch, (names, reads, quals) = simulate_reads(rng, seqs, 30, length=55, n_rate=0.01)
        p = MapParams(max_indels=3, min_score=15, max_candidates=4, max_hits=64)
        if raw:
            text = b"".join(b"@%s\n%s\n+\n%s\n" % (nm, r, bytes(x + 33 for x in q))
                            for nm, r, q in zip(names, reads, quals))
            raw_batch = RawReads("r.fq", np.frombuffer(text, dtype=np.uint8), len(batch), 0, batch.k)
            kept = kept_device_buffers(lambda: map_batch(raw_batch, genome, index, p, cuda, rg=b"", alignments=False))
        else:
            kept = kept_device_buffers(lambda: map_batch(batch, genome, index, p, cuda))
    model = resident.device_slots(len(batch), int(batch.lengths.max()), p, single_end=not paired)
    assert kept and set(kept) <= set(model), set(kept) - set(model)
    for slot, size in kept.items():
        assert size <= cuda.kept_bytes(model[slot]), slot
    scaling = [s for s in kept if model[s] >= 8 * len(batch)]
    assert len(scaling) > 10
    assert sum(kept[s] for s in scaling) >= sum(cuda.kept_bytes(model[s]) for s in scaling) // 3


def counting_allocator(made, make=lambda nbytes: np.zeros(nbytes, dtype=np.uint8)):
    """An allocator for cuda.Arena (host memory, or what `make` makes) that records each allocation's size in
    `made`."""
    def allocate(nbytes):
        made.append(nbytes)
        return make(nbytes)
    return allocate


def test_an_arena_carves_aligned_buffers_that_keep_their_contents():
    """Kept buffers start at cuda.ALIGN, do not overlap, keep what a batch wrote for the next, and grow a
    quarter larger (in a further allocation) when a batch needs more; a planned arena makes its whole plan
    in one allocation, each slot at its planned size from the first, smaller, batch on."""
    made = []
    arena = cuda.Arena(counting_allocator(made))
    a = arena.kept("a", 10, np.int64)
    b = arena.kept("b", (3, 7), np.uint8)
    assert made == [cuda.MIN_CHUNK]
    a[:] = np.arange(10)
    b[:] = 7
    assert np.array_equal(arena.kept("a", 10, np.int64), np.arange(10)) and (arena.kept("b", (3, 7), np.uint8) == 7).all()
    starts = [buf.__array_interface__["data"][0] - made_base for made_base in [arena.chunks[0].__array_interface__["data"][0]]
              for buf, _ in arena.slots.values()]
    assert all(s % cuda.ALIGN == 0 for s in starts) and len(set(starts)) == 2
    big = arena.kept("a", cuda.MIN_CHUNK, np.uint8)   # more than the chunk has left
    assert len(made) == 2 and arena.slots["a"][0].nbytes == cuda.kept_bytes(cuda.MIN_CHUNK) and big.nbytes == cuda.MIN_CHUNK
    assert (arena.kept("b", (3, 7), np.uint8) == 7).all()

    made = []
    planned = {"a": 8000, "b": 100_000, "c": 30}
    arena = cuda.Arena(counting_allocator(made), planned)
    assert made == [sum(cuda.carved_bytes(n) for n in planned.values())]
    for scale in (16, 8, 4, 1):   # a ramp of batches
        for slot, nbytes in planned.items():
            assert arena.kept(slot, nbytes // scale, np.uint8).nbytes == nbytes // scale
    assert len(made) == 1 and {s: buf.nbytes for s, (buf, _) in arena.slots.items()} == \
        {s: cuda.kept_bytes(n) for s, n in planned.items()}
    assert arena.fits({"a": 8000, "c": 1}) and not arena.fits({"a": 8001}) and not arena.fits({"d": 1})


def test_a_thread_sized_for_its_batches_allocates_once_through_the_ramp(monkeypatch, world):
    """A mapping thread that cuda.sized_for prepared (as the mapper's are) allocates its device buffers once,
    for the whole ramp of raw single-end batches a run starts with (fastq.ramp_sizes); an unprepared one
    allocates again as they grow; their records are the same."""
    from gpualign.fastq import RawReads
    rng, genome, seqs, index = world
    monkeypatch.setattr(launch, "THREADS_PER_BLOCK", 8)
    for name, threads in (("SCAN_THREADS", 4), ("SEED_BLOCK_THREADS", 4), ("SEED_FIRST_THREADS", 4),
                          ("SEED_SPILL_THREADS", 4)):   # small blocks: the simulator runs a thread each
        monkeypatch.setattr(launch, name, threads)
    monkeypatch.setattr(cuda, "MIN_BUFFER", 1)
    monkeypatch.setattr(cuda, "MIN_CHUNK", 1)
    p = MapParams(max_indels=3, min_score=15, max_candidates=4, max_hits=64)
    batch, (names, reads, quals) = simulate_reads(rng, seqs, 8, length=55, n_rate=0.01)
    records = [b"@%s\n%s\n+\n%s\n" % (nm, r, bytes(x + 33 for x in q)) for nm, r, q in zip(names, reads, quals)]
    ramp = [RawReads("r.fq", np.frombuffer(b"".join(records[:m]), dtype=np.uint8), m, 0, batch.k) for m in (1, 2, 4, 8)]
    made = []
    monkeypatch.setattr(cuda, "_device_chunk", counting_allocator(made, lambda n: numba_cuda.device_array(n, np.uint8)))

    def run(sized):
        def body():
            if sized:
                cuda.sized_for(len(batch), int(batch.lengths.max()), p, paired=False)
            return [map_batch(raw, genome, index, p, cuda, rg=b"", alignments=False).records for raw in ramp]
        made.clear()
        with ThreadPoolExecutor(max_workers=1) as pool:   # a fresh thread: cuda._local is per thread
            return pool.submit(body).result(), len(made)
    (sized, allocations), (unsized, unsized_allocations) = run(True), run(False)
    assert allocations == 1 and unsized_allocations > 5
    for (rec, off, keys), (rec2, off2, keys2) in zip(sized, unsized):
        assert bytes(rec) == bytes(rec2) and np.array_equal(off, off2) and np.array_equal(keys, keys2) and len(keys)


def test_buffers_made_ahead_go_to_threads_whose_batches_they_fit(monkeypatch):
    """prepare_buffers makes BATCHES_IN_FLIGHT planned arenas where the GPU holds that many full batches
    (none where it holds fewer), counting those a run before left untaken; sized_for gives each thread one
    that fits its plan (reads no longer than PLAN_READ_LENGTH), or a new one (longer reads), releasing those
    that do not fit."""
    p = MapParams(max_indels=3, min_score=15, max_candidates=4, max_hits=64)
    made = []
    monkeypatch.setattr(cuda, "_device_chunk", counting_allocator(made))
    monkeypatch.setattr(cuda, "memory_info", lambda: (80 << 30, 80 << 30))
    monkeypatch.setattr(cuda, "_prepared", [])
    cuda.prepare_buffers(lambda maxlen, quiet: (cuda.BATCHES_IN_FLIGHT - 1, 1000), p, False)
    assert made == [] and cuda._prepared == []
    cuda.prepare_buffers(lambda maxlen, quiet: (cuda.BATCHES_IN_FLIGHT, 1000), p, False)
    assert len(made) == cuda.BATCHES_IN_FLIGHT == len(cuda._prepared)
    ahead = list(cuda._prepared)
    cuda.prepare_buffers(lambda maxlen, quiet: (cuda.BATCHES_IN_FLIGHT, 1000), p, False)   # a later run: untaken ones
    assert len(made) == cuda.BATCHES_IN_FLIGHT and cuda._prepared == ahead   # serve it, none made again
    got = {}

    def thread(name, maxlen):
        cuda.sized_for(1000, maxlen, p, paired=False)
        got[name] = cuda._state().device
    for name, maxlen in (("short", 100), ("planned", cuda.PLAN_READ_LENGTH)):
        t = threading.Thread(target=thread, args=(name, maxlen))
        t.start()
        t.join()
    assert got["short"] in ahead and got["planned"] in ahead and got["short"] is not got["planned"]
    assert len(made) == cuda.BATCHES_IN_FLIGHT and len(cuda._prepared) == cuda.BATCHES_IN_FLIGHT - 2
    t = threading.Thread(target=thread, args=("long", cuda.PLAN_READ_LENGTH + 1))
    t.start()
    t.join()
    assert got["long"] not in ahead and len(made) == cuda.BATCHES_IN_FLIGHT + 1 and cuda._prepared == []


def test_batches_are_planned_to_fit_the_gpus_memory():
    """Three full batches where they fit; else two, at halved sizes for single-end reads; else one;
    paired batches keep their size; and where nothing fits, one line that says what is needed."""
    gib = 1 << 30
    per_batch = lambda n: n * 20_000   # noqa: E731 - 4 GB for 200,000 reads
    plan = lambda free, paired=False: cuda.plan_batches(free, 16 * gib, per_batch, 200_000, paired, most=3)  # noqa: E731
    assert plan(80 * gib) == (3, 200_000)
    assert plan(26 * gib) == (2, 200_000)
    assert plan(22 * gib) == (2, 100_000)       # two half batches before one full one
    assert plan(22 * gib, paired=True) == (1, 200_000)
    assert plan(18 * gib) == (2, 25_000)       # down to cuda.MIN_SINGLE_BATCH reads
    assert plan(17 * gib + (600 << 20)) == (1, 25_000)
    with pytest.raises(InputError) as err:
        plan(17 * gib)
    message = str(err.value)
    assert "\n" not in message and "GPU has 17.0 GiB free" in message and "--backend cpu" in message
    assert "genome and index 16.0 GiB" in message


def test_a_gpu_too_small_for_the_index_is_one_line(monkeypatch, world, tmp_path):
    """map_reads on cuda checks the GPU's free memory before anything goes up: an index that cannot fit
    is an InputError, and a GPU that fits one batch at a time maps the same records."""
    rng, genome, seqs, index = world
    batch, _ = simulate_reads(rng, seqs, 20, length=50)
    monkeypatch.setattr(launch, "THREADS_PER_BLOCK", 8)
    p = MapParams(max_indels=3, min_score=15, max_candidates=2, max_hits=24, batch_size=8)
    fixed = cuda.resident_bytes(genome, index)
    one = cuda.batch_bytes(8, 50, p, True)
    logs = []
    monkeypatch.setattr(cuda, "memory_info", lambda: (fixed + cuda.GPU_RESERVE + one + one // 2, 80 << 30))
    records = {}
    for name in ("cpu", "cuda"):
        out = str(tmp_path / f"{name}.bam")
        map_reads(genome, index, batch, out, p, backend_name=name, threads=2, log=logs.append)
        with pysam.AlignmentFile(out, check_sq=False) as bam:
            records[name] = [r.to_string() for r in bam]
    assert records["cuda"] == records["cpu"]
    assert any("1 batch in flight" in line for line in logs), logs
    monkeypatch.setattr(cuda, "memory_info", lambda: (fixed, 80 << 30))
    with pytest.raises(InputError, match="^backend cuda: this index needs .* GiB of GPU memory"):
        map_reads(genome, index, batch, str(tmp_path / "x.bam"), p, backend_name="cuda", threads=2,
                  log=lambda msg: None)


@pytest.mark.parametrize("dtype, size", [(np.uint32, 10_001), (np.int64, 7), (np.uint8, 0)])
def test_a_memory_mapped_array_goes_up_from_its_file(monkeypatch, tmp_path, rng, dtype, size):
    """upload_from_file reads a memory-mapped array's bytes from its file (an offset inside it, as an
    index's arrays sit in its .npz) on several threads in small chunks: the device copy is the array."""
    monkeypatch.setattr(cuda, "UPLOAD_CHUNK", 4096)
    monkeypatch.setattr(cuda, "UPLOAD_THREADS", 3)
    data = rng.integers(0, 1 << 30, size=size).astype(dtype)
    path = tmp_path / "a.bin"
    path.write_bytes(b"x" * 123 + data.tobytes() + b"tail")
    mapped = np.memmap(path, dtype=dtype, mode="c", offset=123, shape=(size,))
    assert np.array_equal(cuda.upload_from_file(mapped).copy_to_host(), data)


def test_a_voting_block_larger_than_its_shared_slots_is_refused():
    """vote_block keeps MAX_VOTE_THREADS shared slots: a launch setting above that stops with one line, not a
    kernel writing past them."""
    assert resident._voting(launch.MAX_VOTE_THREADS) == launch.MAX_VOTE_THREADS
    with pytest.raises(ValueError, match="1 to 256"):
        resident._voting(launch.MAX_VOTE_THREADS + 1)


def test_a_close_pairs_block_larger_than_its_shared_rows_is_refused():
    """The close-pairs kernel's shared rows are CLOSE_SHARED_THREADS wide: a block above that (or empty) stops with
    one line, not a kernel writing past them."""
    most = launch.CLOSE_SHARED_THREADS
    assert launch.block_threads(most, most, "a close-pairs block") == most
    for threads in (0, most + 1):
        with pytest.raises(ValueError, match=f"a close-pairs block of {threads} threads: 1 to {most}"):
            launch.block_threads(threads, most, "a close-pairs block")


def fastq_text(rng, n):
    """n FASTQ records in the shapes the parser takes: names with and without /1 and /2, comments after a space
    or a tab, IUPAC codes and lower case, empty and long reads, every quality, some lines ending in CR LF."""
    records = []
    for i in range(n):
        length = int(rng.choice([0, 1, 15, 16, 17, int(rng.integers(2, 160))]))
        seq = "".join(rng.choice(list("ACGTNacgtnRYKMSWBDHVU."), size=length))
        qual = "".join(chr(int(v)) for v in rng.integers(33, 127, size=length))
        name = f"r{i}" + ("/1" if i % 5 == 1 else "/2" if i % 5 == 2 else "") + (" x y" if i % 3 == 0 else "\tBC:Z:A" if i % 7 == 0 else "")
        plus = "+" + (f"r{i}" if i % 4 == 0 else "")
        end = "\r\n" if i % 6 == 5 else "\n"
        records.append(end.join(("@" + name, seq, plus, qual)) + end)
    return "".join(records).encode()


def parsed_on_device(raw):
    """parse_on_device's result as host arrays (None where it left the batch to the host)."""
    out = resident.parse_on_device(raw)
    if out is None:
        return None
    arrays, name_hash, *_, shape = out
    host = {f: arrays[f].copy_to_host() for f in ("codes", "quals", "read_off", "word_off", "names", "name_off")}
    host["name_hash"] = name_hash.copy_to_host()
    host["codes"], host["quals"] = host["codes"][:shape.bases], host["quals"][:shape.bases]
    host["names"] = host["names"][:shape.name_bytes]
    return host, shape


def test_fastq_parsed_on_the_gpu_as_the_host_parses_it(monkeypatch, rng):
    """parse_on_device makes of a chunk of FASTQ text the arrays the host's parser makes (codes, qualities,
    names, their offsets and hashes, packed words' offsets), in tiles and scans of several blocks; and leaves
    to the host every chunk with a record the host's parser would reject, whatever the fault."""
    from gpualign.fastq import RawReads, encode_chunk
    from gpualign.reads import word_offsets
    monkeypatch.setattr(launch, "THREADS_PER_BLOCK", 8)
    monkeypatch.setattr(launch, "SCAN_THREADS", 8)
    monkeypatch.setattr(resident, "NEWLINE_TILE", 13)
    for n in (1, 2, 21):
        text = np.frombuffer(fastq_text(rng, n), dtype=np.uint8)
        raw = RawReads("x.fq", text, n, 0, 8)
        host = encode_chunk("x.fq", text, n, 0, 8)
        got, shape = parsed_on_device(raw)
        for f in ("codes", "quals", "read_off", "names", "name_off", "name_hash"):
            assert np.array_equal(got[f], getattr(host, f)), f
        cut = int(rng.integers(0, len(text) + 1))   # the text in two pieces (chunks' pieces), cut anywhere
        in_pieces, shape_in_pieces = parsed_on_device(RawReads("x.fq", (text[:cut], text[cut:]), n, 0, 8))
        assert shape_in_pieces == shape
        for f in ("codes", "quals", "read_off", "names", "name_off", "name_hash"):
            assert np.array_equal(in_pieces[f], got[f]), f
        assert np.array_equal(got["word_off"], word_offsets(host.read_off))
        assert shape == resident.BatchShape(n, max(1, int(host.lengths.max())), len(host.codes), len(host.names))
    lines = fastq_text(rng, 8).split(b"\n")
    h, q = 4 * 3, 4 * 3 + 3   # record r3's header and quality lines
    seq = lines[h + 1] or b"A"
    faults = {"no @": {h: lines[h][1:]}, "a space after @": {h: b"@ " + lines[h][1:]}, "no name": {h: b"@"},
              "no +": {h + 2: b"-"}, "an empty + line": {h + 2: b""}, "lengths": {q: lines[q] + b"I"},
              "a bad base": {h + 1: b"-" + seq[1:], q: b"I" * len(seq)},
              "a bad quality": {h + 1: seq, q: b" " + b"I" * (len(seq) - 1)},
              "too long": {h + 1: b"A" * 1025, q: b"I" * 1025}}
    for fault, changes in faults.items():
        bad = b"\n".join(changes.get(i, line) for i, line in enumerate(lines))
        raw = RawReads("x.fq", np.frombuffer(bad, dtype=np.uint8), 8, 0, 8)
        with pytest.raises(InputError):
            raw.parsed()
        assert resident.parse_on_device(raw) is None, fault


def test_raw_batches_parsed_on_the_gpu_map_to_the_cpus_records(monkeypatch, world, tmp_path):
    """With the reader's batches left raw (fastq.DeviceParsing), the cuda backend parses them on the GPU
    and the sorted BAM holds the cpu backend's records; where a record is bad, its batch is parsed on
    the host, which raises the cpu backend's one-line error; SAM output takes no raw batch."""
    from gpualign import fastq
    rng, genome, seqs, index = world
    batch, (names, reads, quals) = simulate_reads(rng, seqs, 30, length=50, n_rate=0.01)
    text = b"".join(b"@%s c\n%s\n+\n%s\n" % (nm, r, bytes(x + 33 for x in q)) for nm, r, q in zip(names, reads, quals))
    path = tmp_path / "r.fq"
    path.write_bytes(text)
    monkeypatch.setattr(launch, "THREADS_PER_BLOCK", 8)
    monkeypatch.setattr(launch, "SEED_BLOCK_THREADS", 3)   # the simulator runs a Python thread a CUDA thread
    monkeypatch.setattr(launch, "SEED_FIRST_THREADS", 2)
    monkeypatch.setattr(launch, "SEED_SPILL_THREADS", 3)
    monkeypatch.setattr(launch, "SCAN_THREADS", 8)
    monkeypatch.setattr(fastq, "READ_BLOCK", 1000)   # batches that span two decoded blocks: given in pieces
    p = MapParams(max_indels=3, min_score=15, max_candidates=2, max_hits=24, batch_size=8)
    on_gpu = []
    real = resident.parse_on_device
    monkeypatch.setattr(resident, "parse_on_device",
                        lambda raw: (on_gpu.append((raw.n, len(raw.pieces))), real(raw))[1])

    def mapped(backend, fq, fmt="bam"):
        device = fastq.DeviceParsing(backend == "cuda")
        out = str(tmp_path / f"{backend}.{fmt}")
        map_reads(genome, index, fastq.read_batches(str(fq), 8, p.batch_size, 2, device=device), out, p,
                  backend_name=backend, threads=2, sort=fmt == "bam", fmt=fmt, log=lambda msg: None,
                  device_parsing=device)
        with pysam.AlignmentFile(out, check_sq=False) as bam:
            return [r.to_string() for r in bam]

    assert mapped("cuda", path) == mapped("cpu", path)
    assert sum(n for n, _ in on_gpu) == len(batch) and len(on_gpu) >= 3 and any(k == 2 for _, k in on_gpu)
    on_gpu.clear()
    assert mapped("cuda", path, "sam") == mapped("cpu", path, "sam") and sum(n for n, _ in on_gpu) <= p.batch_size
    bad = tmp_path / "bad.fq"
    lines = text.split(b"\n")
    lines[4 * 19 + 2] = b"-"   # the 20th record's third line
    bad.write_bytes(b"\n".join(lines))
    errors = []
    for backend in ("cpu", "cuda"):
        with pytest.raises(InputError) as err:
            mapped(backend, bad)
        errors.append(str(err.value))
    assert errors[0] == errors[1] and "line 79: expected a '+' line" in errors[0]
