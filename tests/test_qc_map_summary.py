"""gpualign.qc.map_summary and `gpualign map --summary`: what a run did, combined, as MultiQC's table."""

import gzip
import json
import math
import os

import pytest
import yaml

from gpualign.cli import main
from gpualign.errors import InputError
from gpualign.qc.map_summary import (FIELDS, combine, insert_size, mqc_table, read_summary, stage_rates, table_row,
                                     write_summary)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "resources", "demo")
PAIRS = [os.path.join(DEMO, f"pairs_R{m}.fq.gz") for m in (1, 2)]


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("idx") / "lambda")
    assert main(["index", os.path.join(DEMO, "lambda.fa"), "-p", p, "-k", "8"]) == 0
    return p


def true_fragments(path):
    """The simulated fragment lengths of the demo pairs, from their names (p{n}:{contig}:{pos1}:
    {strand1}:{pos2}:{strand2}, 1-based leftmost positions) and the mates' lengths."""
    out = []
    with gzip.open(path, "rt") as fh:
        lines = fh.read().splitlines()
    for name, seq in zip(lines[0::4], lines[1::4]):
        _, _, pos1, _, pos2, _ = name[1:].split()[0].split(":")
        out.append(max(int(pos1), int(pos2)) + len(seq) - min(int(pos1), int(pos2)))
    return out


def test_map_summary_of_the_demo_pairs(prefix, tmp_path, capsys):
    """--summary: the counts, the stage times and the insert-size estimate the log prints, near the
    simulated fragments' (400 +/- 40 bp); the duplicate counts with --markdup."""
    out, summary = tmp_path / "pe.bam", tmp_path / "pe.json"
    assert main(["map", prefix, *PAIRS, "-o", str(out), "--summary", str(summary), "--markdup", "--backend", "cpu",
                 "-t", "2"]) == 0
    log = capsys.readouterr().err
    s = read_summary(str(summary))
    assert list(s) == list(FIELDS)
    assert s["reads"] == 2000 and s["paired"] and s["backend"] == "cpu"
    assert f"done: 2000 reads, {s['mapped']} mapped" in log
    assert f"{s['proper']} reads in proper pairs" in log
    assert {"exact match", "seeding", "extension", "traceback"} <= set(s["stage_seconds"])
    assert all(sec >= 0 for sec in s["stage_seconds"].values()) and s["seconds"] > 0
    (block,) = s["insert_sizes"]   # 1,000 fragments: one block
    assert block["valid"] and f"insert size: mean {block['mean']:.1f}, sd {block['sd']:.1f}" in log
    fragments = true_fragments(PAIRS[0])
    true_mean = sum(fragments) / len(fragments)
    assert block["mean"] == pytest.approx(true_mean, abs=5)
    assert block["sd"] == pytest.approx(math.sqrt(sum((f - true_mean) ** 2 for f in fragments) / len(fragments)),
                                        rel=0.2)
    assert block["low"] < min(fragments) <= max(fragments) < block["high"]
    (library,) = s["duplicates"].values()
    assert library["READ_PAIRS_EXAMINED"] == 1000


def test_summary_of_single_reads_has_no_inserts(prefix, tmp_path):
    summary = tmp_path / "se.json"
    assert main(["map", prefix, os.path.join(DEMO, "reads.fq.gz"), "-o", str(tmp_path / "se.bam"),
                 "--summary", str(summary), "--backend", "cpu"]) == 0
    s = json.loads(summary.read_text())
    assert s["reads"] == 2000 and not s["paired"] and s["insert_sizes"] == [] and s["duplicates"] is None
    assert insert_size(s) is None


@pytest.mark.parametrize("name, message", [
    ("out.bam", "--summary {}: is the output, its index or the metrics file"),
    ("nowhere/s.json", "--summary {}: no such folder"),
])
def test_bad_summary_paths_are_refused_before_any_work(prefix, tmp_path, monkeypatch, capsys, name, message):
    monkeypatch.chdir(tmp_path)
    assert main(["map", prefix, PAIRS[0], "-o", "out.bam", "--summary", name, "--backend", "cpu"]) == 1
    assert f"gpualign: error: {message.format(name)}" in capsys.readouterr().err
    assert not os.path.exists("out.bam")


# ---- combining and the MultiQC table ----------------------------------------------------------------


def summary(reads, seconds, stages, inserts=(), paired=False, proper=0, backend="cpu", duplicates=None):
    return {"reads": reads, "mapped": reads - 10, "proper": proper, "seconds": seconds, "backend": backend,
            "paired": paired, "stage_seconds": stages, "duplicates": duplicates,
            "insert_sizes": [{"valid": valid, "mean": mean, "sd": sd, "low": low, "high": high, "fragments": n}
                             for valid, mean, sd, low, high, n in inserts]}


def picard(single, pairs, single_dups, pair_dups):
    return {"UNPAIRED_READS_EXAMINED": single, "READ_PAIRS_EXAMINED": pairs, "SECONDARY_OR_SUPPLEMENTARY_RDS": 0,
            "UNMAPPED_READS": 0, "UNPAIRED_READ_DUPLICATES": single_dups, "READ_PAIR_DUPLICATES": pair_dups,
            "READ_PAIR_OPTICAL_DUPLICATES": 0, "PERCENT_DUPLICATION": 0.5, "ESTIMATED_LIBRARY_SIZE": 7}


def test_combine_adds_counts_and_seconds_and_pools_insert_sizes():
    a = summary(1000, 2.0, {"seeding": 1.0, "traceback": 0.5}, [(True, 300.0, 30.0, 200, 400, 100)], True, 900,
                duplicates={"lib": picard(10, 100, 1, 10)})
    b = summary(3000, 4.0, {"seeding": 2.0, "pairing": 0.25}, [(True, 310.0, 20.0, 240, 380, 300),
                                                              (False, 0, 0, 0, 0, 3)], True, 2800, backend="cuda",
                duplicates={"lib": picard(0, 200, 0, 20), "lib2": picard(5, 0, 5, 0)})
    both = combine([a, b])
    assert (both["reads"], both["mapped"], both["proper"], both["seconds"]) == (4000, 3980, 3700, 6.0)
    assert both["backend"] == "cpu,cuda" and both["paired"]
    assert both["stage_seconds"] == {"seeding": 3.0, "traceback": 0.5, "pairing": 0.25}
    assert len(both["insert_sizes"]) == 3
    # pooled over 400 fragments: mean 307.5; variance within (0.25 * 900 + 0.75 * 400) and between
    # (0.25 * 7.5^2 + 0.75 * 2.5^2); the proper range is the blocks' median
    pooled = insert_size(both)
    assert pooled["mean"] == pytest.approx(307.5)
    assert pooled["sd"] == pytest.approx(math.sqrt(0.25 * 900 + 0.75 * 400 + 0.25 * 7.5 ** 2 + 0.75 * 2.5 ** 2))
    assert (pooled["low"], pooled["high"], pooled["blocks"], pooled["all_blocks"]) == (220, 390, 2, 3)
    lib = both["duplicates"]["lib"]
    assert (lib["READ_PAIRS_EXAMINED"], lib["READ_PAIR_DUPLICATES"], lib["UNPAIRED_READ_DUPLICATES"]) == (300, 30, 1)
    assert lib["PERCENT_DUPLICATION"] == pytest.approx((1 + 60) / (10 + 600))
    assert lib["ESTIMATED_LIBRARY_SIZE"] is None and both["duplicates"]["lib2"] == picard(5, 0, 5, 0)


def test_stage_rates_leave_out_waits_and_empty_stages():
    s = summary(1000, 1.0, {"seeding": 0.5, "BAM records (wait)": 0.2, "index": 0.0, "traceback": 2.0})
    assert stage_rates(s) == {"seeding": 2000.0, "traceback": 500.0}


def test_summary_round_trips_and_a_foreign_json_is_refused(tmp_path):
    s = summary(10, 1.0, {"seeding": 0.5})
    write_summary(str(tmp_path / "s.json"), s)
    assert read_summary(str(tmp_path / "s.json")) == s
    (tmp_path / "other.json").write_text('{"reads": 1}')
    with pytest.raises(InputError, match="no 'mapped'"):
        read_summary(str(tmp_path / "other.json"))


def test_mqc_table_is_multiqc_custom_content():
    """A commented YAML header (id, plot_type table, a title for every column) and one tab-separated
    row for the sample."""
    s = summary(2000, 0.5, {"exact match": 0.125, "BAM records (worker threads)": 0.25},
                [(True, 398.75, 40.5, 209, 587, 1000)], True, 1990)
    text = mqc_table("pe", s)
    comments = [line[2:] for line in text.splitlines() if line.startswith("# ")]
    config = yaml.safe_load("\n".join(comments))
    assert config["id"] == "gpualign_map" and config["plot_type"] == "table"
    header, row = [line.split("\t") for line in text.splitlines() if not line.startswith("#")]
    assert header[0] == "Sample" and set(header[1:]) == set(config["headers"])
    values = dict(zip(header, row))
    assert values["Sample"] == "pe" and values["backend"] == "cpu"
    assert float(values["reads_per_s"]) == 4000 and float(values["mapped_pct"]) == 99.5
    assert float(values["proper_pct"]) == 99.5 and float(values["insert_mean"]) == 398.75
    assert (float(values["proper_low"]), float(values["proper_high"])) == (209, 587)
    assert float(values["stage_bam_records_worker_threads_s"]) == 0.25
    assert config["headers"]["stage_exact_match_s"]["title"] == "exact match (s)"
    assert table_row(summary(5, 1.0, {}))["insert_mean"] == ""   # single reads: no estimate
