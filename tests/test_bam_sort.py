"""bam/sort.py, the BAM writers: UnsortedBam keeps the input order; SortedBam writes the records
in coordinate order (ties in input order, unmapped reads last), exactly as `samtools sort` orders
the unsorted output, whatever the batches and threads, and indexes them. Records are made by pysam
(htslib) on several contigs, so the writers are checked on records they did not encode
themselves; the last test runs the whole command line on reads mapped to a random genome."""

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pysam
import pytest

from gpualign.bam import bgzf, sort
from gpualign.bam.bai import index_fields
from gpualign.bam.sort import SortedBam, UnsortedBam
from gpualign.cli import main

from helpers import (bam_record_bytes, coordinate_keys, random_alignments, random_genome, simulate_pairs,
                     write_fastq)

LENGTHS = (2_000_000, 300_000, 40_000, 5_000, 1_000)


def make_header(order="coordinate"):
    return pysam.AlignmentHeader.from_dict({
        "HD": {"VN": "1.6", "SO": order},
        "SQ": [{"SN": f"c{i}", "LN": ln} for i, ln in enumerate(LENGTHS)]})


def cut(rng, items, n):
    """items in n consecutive batches of random sizes (some may be empty)."""
    edges = sorted(rng.integers(0, len(items) + 1, size=n - 1).tolist())
    return [items[a:b] for a, b in zip([0, *edges], [*edges, len(items)])]


def records(path):
    with pysam.AlignmentFile(path) as bam:
        return [r.to_string() for r in bam]


def sorted_and_unsorted(tmp_path, rng, segments, n_batches, threads):
    """(s.bam written by SortedBam with s.bam.bai, u.bam written by UnsortedBam) of segments cut
    into n_batches batches; each batch takes a random time to encode, so later ones can finish
    first on the sinks' worker threads."""
    header = make_header()
    encoded = [(*bam_record_bytes(header, b, tmp_path), coordinate_keys(b)) for b in cut(rng, segments, n_batches)]
    delays = rng.random(len(encoded)) * 0.01

    def encode(i, result):
        assert result == f"result {i}"
        time.sleep(delays[i])
        return encoded[i]

    sorted_bam, unsorted_bam = str(tmp_path / "s.bam"), str(tmp_path / "u.bam")
    for sink in (SortedBam(sorted_bam, header, encode, 6, threads, index_path=sorted_bam + ".bai",
                           work_dir=str(tmp_path)),
                 UnsortedBam(unsorted_bam, make_header("unsorted"), encode, 6, threads)):
        try:
            for i in range(len(encoded)):
                sink.add(i, f"result {i}")
        except BaseException:
            sink.abort()
            raise
        sink.close()
    return sorted_bam, unsorted_bam


def test_records_held_in_memory_or_written_to_the_run_file_give_the_same_bam(tmp_path, rng, monkeypatch):
    """SortedBam keeps a slice's records where they were made while they fit hold_bytes, the rest go
    to its run file: none held, some, or all, the BAM and its .bai are the same bytes, and the held
    records are left as they were (the tail gathers copies)."""
    monkeypatch.setattr(sort, "PART_RECORDS", 97)   # parts mixing held records and the run file's
    header = make_header()
    segments = random_alignments(rng, header, 1500, with_reads=range(4))
    encoded = [(*bam_record_bytes(header, b, tmp_path), coordinate_keys(b)) for b in cut(rng, segments, 12)]
    total = sum(len(e[0]) for e in encoded)
    made, in_file = {}, {}
    for hold in (0, total // 2, total):
        copies = [(buf.copy(), offsets, keys) for buf, offsets, keys in encoded]
        path = str(tmp_path / f"h{hold}.bam")
        sink = SortedBam(path, header, lambda i: copies[i], 6, 3, index_path=path + ".bai", work_dir=str(tmp_path),
                         hold_bytes=hold)
        for i in range(len(copies)):
            sink.add(i)
        sink.close()
        made[hold] = (Path(path).read_bytes(), Path(path + ".bai").read_bytes())
        in_file[hold] = sink.in_file
        assert all(np.array_equal(c[0], e[0]) for c, e in zip(copies, encoded))
        assert not os.path.exists(sink.tmpdir)
    assert made[0] == made[total // 2] == made[total]
    assert records(str(tmp_path / "h0.bam")) == [s.to_string() for s in sorted(
        segments, key=lambda a: coordinate_keys([a])[0])]   # stable: ties stay in input order
    assert all(in_file[0]) and not any(in_file[total]) and 0 < sum(in_file[total // 2]) < len(encoded)


@pytest.mark.parametrize("n, batches, threads, gather", [(1500, 1, 1, 1 << 16), (2000, 9, 2, 37), (2000, 40, 4, 1)])
def test_sorted_records_are_samtools_sort_of_the_unsorted_ones(tmp_path, rng, monkeypatch, n, batches, threads, gather):
    monkeypatch.setattr(sort, "PART_RECORDS", gather)   # the final pass gathers the records in parts
    segments = random_alignments(rng, make_header(), n, with_reads=range(4))   # c4: no reads
    sorted_bam, unsorted_bam = sorted_and_unsorted(tmp_path, rng, segments, batches, threads)
    given = [s.to_string() for s in segments]
    assert records(unsorted_bam) == given
    pysam.sort("-o", str(tmp_path / "ref.bam"), unsorted_bam)
    ours = records(sorted_bam)
    assert ours == records(str(tmp_path / "ref.bam"))
    # the order itself: contig, position, forward first; ties in input order; unplaced reads last
    keys = coordinate_keys(segments)
    order = sorted(range(n), key=lambda i: keys[i])
    assert ours == [given[i] for i in order]
    unplaced = [g for g, s in zip(given, segments) if s.reference_id < 0]
    assert unplaced and ours[-len(unplaced):] == unplaced
    placed = keys[keys != keys.max()]
    assert len(np.unique(placed)) < len(placed)   # there were ties to keep in order
    with pysam.AlignmentFile(sorted_bam) as bam:
        assert bam.header.to_dict() == make_header().to_dict()
        assert bam.check_index()
        for tid, contig in enumerate(bam.references):   # the .bai finds each contig's records
            assert [r.to_string() for r in bam.fetch(contig)] == \
                [given[i] for i in order if segments[i].reference_id == tid]
    # the run file beside the output is gone
    assert sorted(os.listdir(tmp_path)) == ["ref.bam", "s.bam", "s.bam.bai", "u.bam"]


def test_sorted_bytes_depend_on_the_records_alone(tmp_path, rng, monkeypatch):
    """The final pass cuts the order into parts of PART_RECORDS records, each compressed on its own:
    the BAM and .bai bytes are the same whatever the batches and threads, with parts small enough
    that part edges fall inside ties (the unplaced records share one key) spread over several runs,
    and small BGZF blocks, so records straddle blocks inside a part. The .bai finds what samtools
    index's does."""
    monkeypatch.setattr(sort, "PART_RECORDS", 16)
    monkeypatch.setattr(bgzf, "BGZF_INPUT", 997)
    segments = random_alignments(rng, make_header(), 1500, with_reads=range(4))
    keys = np.sort(coordinate_keys(segments))
    edges = np.arange(16, len(keys), 16)
    assert (keys[edges - 1] == keys[edges]).sum() >= 5   # parts that start inside a tie
    outputs = []
    for batches, threads in ((1, 1), (7, 3), (60, 2), (200, 4)):
        folder = tmp_path / f"{batches}-{threads}"
        folder.mkdir()
        sorted_bam, unsorted_bam = sorted_and_unsorted(folder, rng, segments, batches, threads)
        outputs.append((Path(sorted_bam).read_bytes(), Path(sorted_bam + ".bai").read_bytes()))
    assert all(out == outputs[0] for out in outputs)
    pysam.sort("-o", str(tmp_path / "ref.bam"), unsorted_bam)
    assert records(sorted_bam) == records(str(tmp_path / "ref.bam"))
    copy = str(tmp_path / "copy.bam")
    shutil.copy(sorted_bam, copy)
    pysam.index(copy)
    assert pysam.idxstats(sorted_bam) == pysam.idxstats(copy)
    with pysam.AlignmentFile(sorted_bam) as ours, pysam.AlignmentFile(copy) as theirs:
        for _ in range(200):
            tid = int(rng.integers(0, 4))
            a = int(rng.integers(0, ours.lengths[tid]))
            b = min(ours.lengths[tid], a + int(rng.choice([1, 300, 20_000, 400_000])))
            assert ([r.query_name for r in ours.fetch(ours.references[tid], a, b)]
                    == [r.query_name for r in theirs.fetch(theirs.references[tid], a, b)])


def test_rank_cut_and_part_rows_give_the_stable_order_of_the_runs(rng):
    """Sorted runs (some empty) of few distinct keys, the extremes of int64 among them: for every
    rank, rank_cut ends each run where the stable order of all keys (ties in input order) does,
    and part_rows of consecutive rank ranges lists that order."""
    values = np.array([np.iinfo(np.int64).min, -5, 0, 3, 1 << 40, np.iinfo(np.int64).max])
    runs = [np.sort(rng.choice(values, size=int(rng.integers(0, 12)))) for _ in range(9)]
    keys = np.concatenate(runs)
    run_off = np.cumsum([0] + [len(r) for r in runs], dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    run_of = np.searchsorted(run_off, np.arange(len(keys)), side="right") - 1
    for rank in range(len(keys) + 1):
        taken = np.bincount(run_of[order[:rank]], minlength=len(runs))
        assert sort.rank_cut(keys, run_off, rank).tolist() == (run_off[:-1] + taken).tolist(), rank
    for step in (1, 4, 7):
        rows = [sort.part_rows(keys, sort.rank_cut(keys, run_off, a),
                               sort.rank_cut(keys, run_off, min(len(keys), a + step)))
                for a in range(0, len(keys), step)]
        assert np.concatenate(rows).tolist() == order.tolist()


def test_part_rows_sort_close_keys_by_radix_as_a_stable_sort_does(rng, monkeypatch):
    """Runs of keys a narrow span apart (one radix pass, several, and the merge sort above RADIX_SPAN), many of
    them tied: part_rows lists each part's rows in the stable order of the keys (ties in run then row order)."""
    monkeypatch.setattr(sort, "RADIX_SPAN", 1 << 30)   # read by part_rows.py_func as it runs (the compiled one: 1 << 44)
    for span in (1, 1500, 1 << 25, 1 << 33):
        base = int(rng.integers(0, 1 << 40))
        runs = [np.sort(base + rng.integers(0, span, size=int(rng.integers(0, 300)))) for _ in range(23)]
        keys = np.concatenate(runs).astype(np.int64)
        run_off = np.cumsum([0] + [len(r) for r in runs], dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        rows = [sort.part_rows.py_func(keys, sort.rank_cut(keys, run_off, a),
                                       sort.rank_cut(keys, run_off, min(len(keys), a + 997)))
                for a in range(0, len(keys), 997)]
        assert np.concatenate(rows).tolist() == order.tolist(), span
        cut = sort.rank_cut(keys, run_off, 0), sort.rank_cut(keys, run_off, len(keys))
        assert sort.part_rows(keys, *cut).tolist() == order.tolist(), span


def test_a_slices_order_is_a_stable_sort_of_its_keys(rng, monkeypatch):
    """stable_rows (key_order's: the placed keys radix sorted where they span less than RADIX_SPAN,
    else merge sorted, then the unmapped ones as they came) against numpy's stable sort, on fresh
    random slices: keys one contig apart or many, unmapped reads among them or none, many ties, a
    negative key, one row, none."""
    from gpualign.bam.records import UNMAPPED_KEY
    monkeypatch.setattr(sort, "RADIX_SPAN", 1 << 30)   # read by stable_rows.py_func as it runs (compiled: 1 << 44)
    ways = set()
    for rep in range(24):
        n = int(rng.integers(0, 3 if rep < 3 else 3000))
        span = int(rng.choice([1, 1500, 1 << 25, 1 << 33]))
        keys = (int(rng.integers(0, 1 << 40)) + rng.integers(0, span, size=n)).astype(np.int64)
        keys[rng.random(n) < rng.choice([0.0, 0.05, 1.0])] = UNMAPPED_KEY
        if rep % 7 == 6 and n:
            keys[0] = -5
        want = np.argsort(keys, kind="stable").tolist()
        for stable_rows in (sort.stable_rows.py_func, sort.stable_rows):
            assert stable_rows(keys, np.arange(n)).tolist() == want, (n, span)
        placed = keys[keys != UNMAPPED_KEY]
        ways.add("merge" if len(placed) > 1 and (placed.min() < 0 or np.ptp(placed) >= 1 << 30) else
                 "radix" if len(placed) > 1 else "none placed")
    assert ways == {"merge", "radix", "none placed"}, ways
    offsets = np.cumsum([0] + [5] * 40).astype(np.int64)   # key_order: the rows of that order, and their records
    keys = rng.integers(0, 9, 40).astype(np.int64)
    got_keys, starts, sizes, order = sort.key_order(offsets, keys)
    assert order.tolist() == np.argsort(keys, kind="stable").tolist()
    assert got_keys.tolist() == keys[order].tolist() and starts.tolist() == offsets[:-1][order].tolist()
    assert (sizes == 5).all()


@pytest.mark.parametrize("threads", [1, 3, 16])
def test_the_slices_arrays_joined_on_threads_are_their_concatenation(rng, threads):
    """join_slices (the tail's keys, starts, sizes and spans, copied by groups of slices on threads) against
    np.concatenate, on fresh random slices: empty ones among them, fewer slices than threads, one."""
    for nslices in (1, 2, 40):
        lengths = rng.integers(0, 3 if nslices == 2 else 500, nslices)
        columns = [[rng.integers(-1 << 40, 1 << 40, m).astype(dtype) for m in lengths]
                   for dtype in (np.int64, np.int64, np.int32, np.int32, np.uint16, np.uint16)]
        joined = sort.join_slices(columns, threads)
        assert len(joined) == len(columns)
        for got, column in zip(joined, columns):
            want = np.concatenate(column)
            assert got.dtype == want.dtype and got.tolist() == want.tolist()


@pytest.mark.parametrize("kind", ["none", "unplaced only", "one contig"])
def test_edge_inputs_give_a_valid_sorted_indexed_bam(tmp_path, rng, kind):
    header = make_header()
    segments = random_alignments(rng, header, 300, with_reads=[2])
    if kind == "none":
        segments = []
    elif kind == "unplaced only":
        segments = [s for s in segments if s.reference_id < 0]
    sorted_bam, unsorted_bam = sorted_and_unsorted(tmp_path, rng, segments, 3, 2)
    pysam.sort("-o", str(tmp_path / "ref.bam"), unsorted_bam)
    assert records(sorted_bam) == records(str(tmp_path / "ref.bam"))
    os.rename(sorted_bam + ".bai", tmp_path / "ours.bai")
    pysam.index(sorted_bam)
    theirs = pysam.idxstats(sorted_bam)
    os.replace(tmp_path / "ours.bai", sorted_bam + ".bai")
    assert pysam.idxstats(sorted_bam) == theirs


def test_an_aborted_sorted_writer_leaves_nothing(tmp_path, rng):
    header = make_header()
    buf, offsets = bam_record_bytes(header, random_alignments(rng, header, 50), tmp_path)
    out = SortedBam(str(tmp_path / "s.bam"), header, lambda b, r: (buf, offsets, coordinate_keys(b)), 1, 2,
                    index_path=str(tmp_path / "s.bam.bai"), work_dir=str(tmp_path))
    assert len(os.listdir(tmp_path)) == 1   # its run file's folder
    out.add(random_alignments(rng, header, 50), None)
    out.abort()
    assert os.listdir(tmp_path) == []


def test_map_sorts_paired_reads_on_several_contigs_as_samtools(tmp_path, rng):
    """The command line, mapping interleaved pairs (some with a mate that cannot map, which is
    placed at its mate's position) to three contigs, in several batches on two threads."""
    genome, seqs = random_genome(rng, lengths=(5000, 3000, 1500), repeat=0)
    fa = tmp_path / "ref.fa"
    fa.write_text("".join(f">chr{i + 1}\n{s}\n" for i, s in enumerate(seqs)))
    _, (names, reads, quals) = simulate_pairs(rng, seqs, 150, length=60, insert=(300, 30))
    for f in range(0, 150, 10):   # junk mates: unmapped, placed at the mapped mate's position
        reads[2 * f + 1] = b"".join(rng.choice([b"A", b"C", b"G", b"T"], size=60))
        quals[2 * f + 1] = b"I" * 60
    for f in range(5, 150, 25):   # copies of fragment 0: ties, kept in input order
        names[2 * f:2 * f + 2] = [b"dup%d" % f] * 2
        reads[2 * f:2 * f + 2] = reads[:2]
        quals[2 * f:2 * f + 2] = quals[:2]
    write_fastq(tmp_path / "reads.fq", names, reads, quals)
    prefix = str(tmp_path / "idx")
    assert main(["index", str(fa), "-p", prefix, "-k", "8"]) == 0
    common = ["map", prefix, str(tmp_path / "reads.fq"), "-p", "-t", "2", "--backend", "cpu", "--batch-size", "40"]
    assert main([*common, "-o", str(tmp_path / "s.bam")]) == 0
    assert main([*common, "-o", str(tmp_path / "u.bam"), "--unsorted"]) == 0
    pysam.sort("-o", str(tmp_path / "ref.bam"), str(tmp_path / "u.bam"))
    ours = records(str(tmp_path / "s.bam"))
    assert ours == records(str(tmp_path / "ref.bam"))
    with pysam.AlignmentFile(str(tmp_path / "s.bam")) as bam:
        assert sum(1 for r in bam if r.is_unmapped and r.reference_id >= 0) >= 10   # junk mates, placed
    os.rename(tmp_path / "s.bam.bai", tmp_path / "ours.bai")
    pysam.index(str(tmp_path / "s.bam"))
    theirs = pysam.idxstats(str(tmp_path / "s.bam"))
    os.replace(tmp_path / "ours.bai", tmp_path / "s.bam.bai")
    assert pysam.idxstats(str(tmp_path / "s.bam")) == theirs


def test_records_encoded_in_slices_are_the_bytes_of_whole_batches(tmp_path, monkeypatch):
    """A batch's records are encoded in slices on several threads (records.record_slices): tiny slices
    give the bytes, sorted and unsorted, single-end, paired and with -C comments, that one slice does."""
    import gzip
    from gpualign.bam import records as records_module
    demo = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "resources", "demo")
    prefix = str(tmp_path / "idx")
    assert main(["index", os.path.join(demo, "lambda.fa"), "-p", prefix, "-k", "8"]) == 0
    with gzip.open(os.path.join(demo, "reads.fq.gz"), "rt") as fh:
        lines = fh.read().splitlines()
    lines[0::4] = [f"{h} BC:Z:{i % 7}" for i, h in enumerate(lines[0::4])]   # comments for -C
    (tmp_path / "c.fq").write_text("\n".join(lines) + "\n")
    runs = {"single": [str(tmp_path / "c.fq"), "-C"],
            "paired": [os.path.join(demo, "pairs_R1.fq.gz"), os.path.join(demo, "pairs_R2.fq.gz")]}
    out = {}
    for slice_size in (records_module.RECORDS_PER_TASK, 6):
        monkeypatch.setattr(records_module, "RECORDS_PER_TASK", slice_size)
        for name, reads in runs.items():
            for order in ("", "--unsorted"):
                path = tmp_path / f"{name}{order}{slice_size}.bam"
                assert main(["map", prefix, *reads, "-t", "3", "--backend", "cpu", "-o", str(path),
                             *([order] if order else [])]) == 0
                out.setdefault((name, order), []).append(records(str(path)))
    for key, (whole, sliced) in out.items():
        assert whole == sliced and len(whole) >= 2000, key


def test_the_tail_code_is_loaded_with_the_types_the_tail_uses(tmp_path, rng):
    """load_tail_code (run while mapping) calls the final pass's compiled functions with the argument
    types a real sorted write gives them: after both, each has no other compiled signature (a
    different type would load, or compile, its code in the tail all the same)."""
    sort.load_tail_code(1)
    from gpualign.bam import bai
    tail = (sort.key_order, sort.rank_cut, sort.part_rows, sort.gather_at, sort.index_entries, sort.entries_of_rows,
            bai.placed_prefix, bai.piece_index, bai.merge_touching, bai.filled_windows)
    before = {f: set(f.signatures) for f in tail}
    assert all(before.values())
    segments = random_alignments(rng, make_header(), 300, with_reads=range(4))
    sorted_and_unsorted(tmp_path, rng, segments, 3, 2)
    assert {f: set(f.signatures) for f in before} == before
    assert index_fields(sort.TINY_RECORD)[:, 0].tolist() == [38, 0, 0, 1, 4680, 4]   # a whole record


def test_the_index_fields_kept_beside_the_keys_are_those_of_the_records(tmp_path, rng):
    """What the sorted sink keeps of each record for the .bai (its key's refID and pos, bai.spans_in_order's end,
    bin and flag, its size) gives the index entries that reading the records back gives, for a part's rows taken in
    any order; and records.key_place inverts sort_key."""
    from gpualign.bam.bai import spans_in_order
    from gpualign.bam.records import FLAG_REVERSE, UNMAPPED_KEY, key_place, sort_key
    header = make_header()
    segments = random_alignments(rng, header, 400, with_reads=range(4))
    buf, offsets = bam_record_bytes(header, segments, tmp_path)
    keys = coordinate_keys(segments)
    fields = index_fields(buf)
    for key, tid, pos in zip(keys, fields[1], fields[2]):
        assert key_place(key) == ((tid, pos) if key != UNMAPPED_KEY else (-1, -1))
    for flag, rid, pos in ((0, 0, 0), (FLAG_REVERSE, 3, (1 << 31) - 2), (0, (1 << 29) + 5, 12_345), (16, -1, -1)):
        assert key_place(sort_key(flag, rid, pos)) == ((rid, pos) if rid >= 0 else (-1, -1))
    keys, starts, sizes, order = sort.key_order(offsets, keys)
    end, bins, flag = spans_in_order(buf, offsets, order)
    assert (end == fields[3][order]).all() and (bins == fields[4][order]).all() and (flag == fields[5][order]).all()
    rows = rng.permutation(len(keys))[:250].astype(np.int64)
    part = sort.gather_at(buf.ctypes.data, starts, sizes, rows, sort.MEMMOVE)
    _, csizes, usizes = bgzf.sized_bgzf_blocks(part, 1)
    assert (sort.entries_of_rows(keys, end, bins, flag, sizes, rows, csizes, usizes)
            == sort.index_entries(part, csizes, usizes)).all()
