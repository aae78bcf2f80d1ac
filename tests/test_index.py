"""The k-mer index (index.py) against naive.py's dictionary of positions, on seeded random genomes
with N runs and several contigs, some shorter than k."""

import numpy as np
import pytest

from gpualign.encode import pack_codes, pack_nmask
from gpualign.genome import Genome
from gpualign.index import build_index

import naive

KS = (4, 5, 7, 10)


def random_contigs(rng, k):
    """Base codes per contig: a few contigs of random lengths (one at most k - 1, one exactly k),
    N runs of various lengths, a contig that is all N now and then, and a low-complexity stretch
    (full bins)."""
    lengths = [int(rng.integers(1, k)), k] + [int(rng.integers(1, 400)) for _ in range(rng.integers(1, 5))]
    contigs = []
    for n in rng.permutation(lengths):
        codes = rng.integers(0, 4, size=n).astype(np.uint8)
        for _ in range(rng.integers(0, 4)):
            s = int(rng.integers(0, n))
            codes[s:s + int(rng.integers(1, 2 * k))] = 4
        if n > 60 and rng.random() < 0.5:
            s = int(rng.integers(0, n - 40))
            codes[s:s + 40] = np.resize(rng.integers(0, 4, size=int(rng.integers(1, 3))), 40)
        if rng.random() < 0.1:
            codes[:] = 4
        contigs.append(codes)
    return contigs


def genome_of(contigs) -> Genome:
    codes = np.concatenate(contigs)
    lengths = np.array([len(c) for c in contigs], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    return Genome(pack_codes(codes), pack_nmask(codes), [f"c{i}" for i in range(len(contigs))], lengths, offsets)


# chunk: k-mer starts between progress checks; small chunks split contigs, which must change nothing;
# threads: ranges of codes built apart (more ranges than the machine's threads, too), which must change nothing
@pytest.mark.parametrize("chunk,threads", [(1 << 24, 1), (1, 1), (13, 1), (1 << 24, 2), (13, 3), (29, 7)],
                         ids=["whole", "chunk1", "chunk13", "threads2", "chunk13-threads3", "chunk29-threads7"])
@pytest.mark.parametrize("k", KS)
def test_build_index_matches_naive(rng, k, chunk, threads):
    for _ in range(3):
        contigs = random_contigs(rng, k)
        genome = genome_of(contigs)
        assert genome.codes().tolist() == np.concatenate(contigs).tolist()
        index = build_index(genome, k=k, max_occ=5, threads=threads, chunk=chunk)
        offsets, positions = naive.naive_index(contigs, k)
        assert index.k == k
        assert index.offsets.shape == (4 ** k + 1,)
        assert np.array_equal(index.offsets, offsets), "bin sizes differ"
        assert index.positions.dtype == np.uint32
        assert index.positions.tolist() == positions


def test_capped_bins_count_the_bins_over_max_occ(rng):
    k = 4
    contigs = random_contigs(rng, k) + [rng.integers(0, 4, size=1500).astype(np.uint8)]
    genome = genome_of(contigs)
    sizes = sorted({len(v) for v in naive.naive_bins(contigs, k).values()})
    assert len(sizes) > 5
    # max_occ at bin sizes that occur (the boundary: a bin of exactly max_occ is not capped), and around
    for max_occ in {1, sizes[0], sizes[len(sizes) // 2], sizes[len(sizes) // 2] - 1, sizes[-1], sizes[-1] + 1}:
        if max_occ < 1:
            continue
        index = build_index(genome, k=k, max_occ=max_occ)
        want = sum(len(v) > max_occ for v in naive.naive_bins(contigs, k).values())
        assert (index.max_occ, index.capped_bins) == (max_occ, want)
    assert build_index(genome, k=k, max_occ=sizes[-1]).capped_bins == 0


def test_load_index_maps_the_stored_arrays_and_reads_a_compressed_one_whole(tmp_path, rng):
    """save_index stores the arrays uncompressed: load_index memory-maps them (nothing read at load),
    writeable copy-on-write, equal to np.load's; an index written compressed still loads, read whole;
    one with int64 offsets (before OFFSET) loads with OFFSET's, equal."""
    import numpy as np
    from gpualign.index import OFFSET, KmerIndex, load_index, save_index
    index = KmerIndex(5, 50, np.cumsum(rng.integers(0, 3, size=4 ** 5 + 1)).astype(OFFSET),
                      rng.integers(0, 1 << 31, size=3000).astype(np.uint32))
    save_index(index, str(tmp_path / "a.idx.npz"), 10_000, "a")
    np.savez_compressed(tmp_path / "b.idx.npz", k=5, max_occ=50, offsets=index.offsets, positions=index.positions)
    np.savez(tmp_path / "c.idx.npz", k=5, max_occ=50, offsets=index.offsets.astype(np.int64), positions=index.positions)
    for name, mapped in (("a", (True, True)), ("b", (False, False)), ("c", (False, True))):
        got = load_index(str(tmp_path / f"{name}.idx.npz"))
        assert (got.k, got.max_occ) == (5, 50)
        for field, is_mapped in zip(("offsets", "positions"), mapped):
            arr = getattr(got, field)
            assert isinstance(arr, np.memmap) == is_mapped and arr.flags.writeable
            assert arr.dtype == getattr(index, field).dtype and np.array_equal(arr, getattr(index, field))


MEMORY_PROBE = """
import sys
import numpy as np
from gpualign.encode import pack_codes, pack_nmask
from gpualign.genome import Genome
from gpualign.index import build_index, index_memory

def genome(n, seed):
    codes = np.random.default_rng(seed).integers(0, 4, size=n, dtype=np.uint8)
    return Genome(pack_codes(codes), pack_nmask(codes), ["c"], np.array([n]), np.array([0]))

k, n = int(sys.argv[1]), int(sys.argv[2])
build_index(genome(5000, 1), k=k, threads=2)   # compiled (or loaded) before the measurement
g = genome(n, 2)
def status(field):   # kB lines of /proc/self/status
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith(field))

with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")   # the peak starts again from here: compiling above may have taken more
before = status("VmRSS:")
index = build_index(g, k=k, threads=2)
print(before, status("VmHWM:"), index_memory(g.size, k), len(index.positions))
"""


def test_building_takes_no_more_memory_than_the_model(tmp_path):
    """index_memory is what `gpualign index` and the workflow's mem_mb rest on (a human genome's index
    in 16 GiB): build_index's peak beyond what the process held before stays within it, on a 24 Mbp
    genome at k=12 (a fresh process, so the peak is the build's)."""
    import subprocess
    import sys
    n = 24_000_000
    out = subprocess.run([sys.executable, "-c", MEMORY_PROBE, "12", str(n)], capture_output=True, text=True,
                         check=True).stdout.split()
    before, peak, model, positions = (int(v) for v in out)
    assert positions == n - 11
    assert peak - before <= model + (48 << 20), (peak - before, model)
    # and the model is not loose: the offsets (4 bytes a bin) and positions (4 a position) are most of it
    assert model <= 4 * (4 ** 12 + 1) + 4 * n + 8 * (1 << 25)


def test_a_genome_of_4_gbp_or_more_stops_with_one_line():
    """Positions are 32-bit: a larger genome is refused before any memory is taken, naming the limit."""
    from gpualign.errors import InputError
    big = Genome(np.zeros(4, np.uint32), np.zeros(2, np.uint32), ["a", "b"], np.array([1 << 31, 1 << 31]),
                 np.array([0, 1 << 31]))
    with pytest.raises(InputError, match="below 4 Gbp") as err:
        build_index(big, k=8)
    assert "\n" not in str(err.value)


def test_auto_k_grows_with_the_genome_and_is_said(rng):
    """k=auto: the smallest k from 8 to 14 with 4^k >= the genome's size, in a progress line; an explicit k wins."""
    from gpualign.index import auto_k
    assert [auto_k(n) for n in (1, 48_502, 65_536, 65_537, 4_641_652, 20_000_000, 64_444_167, 3_100_000_000)] == \
        [8, 8, 8, 9, 12, 13, 13, 14]
    contigs = [rng.integers(0, 4, size=70_000).astype(np.uint8)]
    lines = []
    index = build_index(genome_of(contigs), k="auto", progress=lines.append)
    assert index.k == 9 and any("k=9 chosen for a genome of 70000 bp" in line for line in lines)
    lines.clear()
    assert build_index(genome_of(contigs), k=7, progress=lines.append).k == 7
    assert not any("chosen" in line for line in lines)
