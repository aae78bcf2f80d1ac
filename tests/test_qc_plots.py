"""gpualign.qc.plots: each plot of a BAM of known content shows the known values, and is saved as a
real PNG image, the same bytes every time."""

import matplotlib.image
import numpy as np
import pytest

from gpualign.qc.coverage import binned_depth
from gpualign.qc.plots import (DPI, coverage_figure, insert_size_plot, sample_figures, save_png,
                               throughput_figure)

from helpers import known_bam_stats

STAGES = {"exact match": 0.5, "seeding": 2.0, "BAM records (wait)": 0.25, "traceback": 1.0}
SUMMARY = {"reads": 1000, "mapped": 990, "proper": 980, "seconds": 4.0, "backend": "cpu", "paired": True,
           "stage_seconds": STAGES, "duplicates": None,
           "insert_sizes": [{"valid": True, "mean": 275.0, "sd": 25.0, "low": 175.0, "high": 375.0,
                             "fragments": 2}]}


@pytest.fixture
def figures(tmp_path, rng):
    """Every plot of helpers' known BAM, made as the workflow's rules make them."""
    sections, flagstat, bam, _, _ = known_bam_stats(tmp_path, rng)
    figs = sample_figures(sections, flagstat, binned_depth(bam, target=30), SUMMARY, "known", True)
    figs["insert_sizes"] = insert_size_plot(sections, SUMMARY, "known")
    return figs


def bars(ax):
    """(centre, height) of the bars drawn, zero-height ones left out."""
    return [(round(p.get_x() + p.get_width() / 2, 6), p.get_height()) for p in ax.patches if p.get_height()]


def test_mapq_plot_shows_the_known_counts(figures):
    ax = figures["mapq"].axes[0]
    assert bars(ax) == [(0, 2), (17, 1), (60, 8)]
    assert "11 mapped reads, duplicates left out, 72.7% at MAPQ >= 20" in figures["mapq"].get_suptitle()


def test_error_plot_shows_each_error_at_its_cycle(figures):
    top, bottom = figures["errors"].axes
    (mismatch,) = top.lines
    assert {int(x): y for x, y in zip(*mismatch.get_data()) if y} == {4: pytest.approx(100 / 12),
                                                                    20: pytest.approx(100 / 12)}
    insertion, deletion = bottom.lines
    assert {int(x): y for x, y in zip(*insertion.get_data()) if y} == {6: pytest.approx(100 / 12)}
    assert {int(x): y for x, y in zip(*deletion.get_data()) if y} == {5: pytest.approx(100 / 12)}


def test_insert_size_plot_shows_the_pairs_and_gpualigns_estimate(figures):
    ax = figures["insert_sizes"].axes[0]
    pairs = ax.lines[0]
    assert {int(x): int(y) for x, y in zip(*pairs.get_data()) if y} == {250: 1, 300: 1}
    assert list(ax.lines[1].get_xdata()) == [275.0, 275.0]   # the estimate's mean
    assert "mean 275.0, sd 25.0 bp" in ax.get_legend().get_texts()[2].get_text()


def test_coverage_plot_shows_the_depth_of_each_bin(figures):
    """Bins of 100 bp over chrA (2,000 bp) then chrB: 13 reads of 20 bp, less the duplicate and the
    unmapped one, give 220 bases of depth; the bars hold each bin's mean depth."""
    ax = figures["coverage"].axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert len(heights) == 30
    assert sum(h * 100 for h in heights) == pytest.approx(11 * 20)
    assert [t.get_text() for t in ax.texts] == ["chrA", "chrB"]


def test_duplication_plot_splits_the_primary_reads(figures):
    ax = figures["duplicates"].axes[0]
    assert [p.get_width() for p in ax.patches] == [11, 1, 1]   # unique, duplicates, unmapped
    assert "duplication rate 8.33% of mapped reads" in figures["duplicates"].get_suptitle()


def test_throughput_plot_shows_reads_per_second_of_each_stage(figures):
    """End to end: reads over wall seconds; a stage: reads over its seconds; waits are not stages."""
    ax = figures["throughput"].axes[0]
    label_at = {y: t.get_text() for y, t in zip(ax.get_yticks(), ax.get_yticklabels())}
    shown = {label_at[p.get_y() + p.get_height() / 2]: p.get_width() for p in ax.patches}
    assert shown == {"end to end (wall)": 250.0, "exact match": 2000.0, "seeding": 500.0, "traceback": 1000.0}
    top_to_bottom = [label_at[y] for y in sorted(label_at, reverse=True)]
    assert top_to_bottom == ["end to end (wall)", "exact match", "seeding", "traceback"]


def test_plots_are_png_images_the_same_bytes_every_time(figures, tmp_path):
    for name, fig in figures.items():
        path = tmp_path / f"{name}.png"
        save_png(fig, str(path))
        image = matplotlib.image.imread(str(path))
        width, height = fig.get_size_inches() * DPI
        assert image.shape == (round(height), round(width), 4), name
        assert image[..., :3].std() > 0.05, f"{name}: a blank image"
        again = tmp_path / f"{name}.again.png"
        save_png(fig, str(again))
        assert path.read_bytes() == again.read_bytes(), name


def test_empty_inputs_still_give_a_figure():
    """A sample with no mapped reads: the plots are drawn, empty, rather than failing the workflow."""
    assert coverage_figure([], "none").axes
    fig = throughput_figure(dict(SUMMARY, reads=0, seconds=0.0, stage_seconds={}), "none")
    assert [p.get_width() for p in fig.axes[0].patches] == [0.0]
    assert np.isfinite(fig.get_size_inches()).all()
