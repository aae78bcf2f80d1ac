"""The report's plots of one sample, drawn with matplotlib from the QC files (never from the BAM):
one function per plot, each returning a Figure whose artists hold the values shown, so a test reads
back what a plot shows.

Figures are made without pyplot (no global state, no display) and saved as PNG by Agg with no
version or date in the file, so the same data gives the same bytes.
"""

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import StrMethodFormatter

from ..atomic import atomic_path
from .map_summary import insert_size, stage_rates
from .samtools import duplication, error_rates, insert_sizes, mapq_histogram

SIZE = (8, 4.5)   # inches; at DPI, 800 x 450 pixels
WIDE = (11, 4.5)
DPI = 100
COLOURS = {"main": "#2b6cb0", "second": "#dd6b20", "third": "#718096", "good": "#38a169"}
MAX_CONTIG_LABELS = 24   # coverage: only the longest contigs are named, so the labels stay legible


def save_png(fig: Figure, path: str):
    """The figure as PNG, atomically; no Software/date metadata, so output depends on data only."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": None})


def new_figure(title: str, size=SIZE, rows: int = 1) -> tuple:
    fig = Figure(figsize=size, layout="constrained")
    axes = fig.subplots(rows, 1, sharex=True) if rows > 1 else fig.subplots()
    fig.suptitle(title)
    return fig, axes


def mapq_figure(mapq: np.ndarray, counts: np.ndarray, sample: str) -> Figure:
    """Reads at each MAPQ (primary mapped reads that are not duplicates), the share at 20 or more."""
    total = int(counts.sum())
    confident = int(counts[mapq >= 20].sum())
    share = f", {100 * confident / total:.1f}% at MAPQ >= 20" if total else ""
    fig, ax = new_figure(f"{sample}: MAPQ of {total:,} mapped reads, duplicates left out{share}")
    ax.bar(mapq, counts, width=1.0, color=COLOURS["main"])
    ax.set_yscale("log")   # typically most reads at 60 and a few at each other value
    ax.set_ylim(bottom=0.5)   # a single read still shows as a bar
    ax.set_xlabel("MAPQ")
    ax.set_ylabel("reads (log scale)")
    ax.set_xlim(-1, max(int(mapq.max(initial=0)), 60) + 1)
    return fig


def insert_size_figure(sizes: np.ndarray, pairs: np.ndarray, estimate: dict | None, sample: str) -> Figure:
    """Pairs at each insert size (FR pairs, from samtools stats), with gpualign's own estimate: its
    mean, and the range in which pairs are proper, shaded."""
    fig, ax = new_figure(f"{sample}: insert sizes of {int(pairs.sum()):,} pairs")
    ax.plot(sizes, pairs, color=COLOURS["main"], drawstyle="steps-mid", label="pairs (samtools stats)")
    if estimate:
        ax.axvspan(estimate["low"], estimate["high"], color=COLOURS["good"], alpha=0.15,
                   label=f"proper pairs: {estimate['low']:.0f}-{estimate['high']:.0f} bp (gpualign)")
        ax.axvline(estimate["mean"], color=COLOURS["second"],
                   label=f"mean {estimate['mean']:.1f}, sd {estimate['sd']:.1f} bp (gpualign)")
    seen = sizes[pairs > 0]
    if len(seen):   # samtools lists sizes from 0: show where the pairs and the proper range are
        low = min(seen[0], estimate["low"]) if estimate else seen[0]
        high = max(seen[-1], estimate["high"]) if estimate else seen[-1]
        margin = 0.05 * (high - low) + 1
        ax.set_xlim(max(low - margin, 0), high + margin)
    ax.set_xlabel("insert size (bp)")
    ax.set_ylabel("pairs")
    ax.legend(loc="best")
    return fig


def coverage_figure(rows: list, sample: str) -> Figure:
    """Mean depth of each bin along the contigs, laid end to end; contig borders as thin lines, the
    longest contigs named."""
    fig, ax = new_figure(f"{sample}: coverage along the genome", WIDE)
    if not rows:
        return fig
    lengths = {}
    for name, _, end, _ in rows:
        lengths[name] = max(lengths.get(name, 0), end)
    offsets = dict(zip(lengths, np.cumsum([0] + list(lengths.values()))[:-1]))
    total = sum(lengths.values())
    scale, unit = (1e6, "Mbp") if total >= 5e6 else (1e3, "kbp")
    x = np.array([(offsets[name] + (start + end) / 2) / scale for name, start, end, _ in rows])
    depth = np.array([d for *_, d in rows])
    widths = np.array([(end - start) / scale for _, start, end, _ in rows])
    ax.bar(x, depth, width=widths, color=COLOURS["main"], linewidth=0)
    mean = float(np.sum(depth * widths) / np.sum(widths))
    ax.axhline(mean, color=COLOURS["second"], linewidth=1, label=f"mean depth {mean:.1f}x")
    longest = set(sorted(lengths, key=lengths.get, reverse=True)[:MAX_CONTIG_LABELS])
    for name, offset in offsets.items():
        if offset:
            ax.axvline(offset / scale, color=COLOURS["third"], linewidth=0.5)
        if name in longest:
            ax.text((offset + lengths[name] / 2) / scale, 1.0, name, transform=ax.get_xaxis_transform(),
                    ha="center", va="bottom", fontsize=7, clip_on=False)
    ax.set_xlim(0, total / scale)
    ax.set_xlabel(f"position ({unit}; contigs end to end)")
    ax.set_ylabel("mean depth in bin")
    ax.legend(loc="lower right")
    return fig


def error_rate_figure(rates: dict, sample: str) -> Figure:
    """Mismatches (top) and insertions and deletions (bottom) per mapped base, at each cycle."""
    fig, (top, bottom) = new_figure(f"{sample}: mismatches and indels by position in the read", rows=2)
    cycle = rates["cycle"]
    if rates["mismatch"] is not None:
        top.plot(cycle, 100 * rates["mismatch"], color=COLOURS["main"], label="mismatches")
    top.set_ylabel("mismatches (%)")
    bottom.plot(cycle, 100 * rates["insertion"], color=COLOURS["second"], label="insertions")
    bottom.plot(cycle, 100 * rates["deletion"], color=COLOURS["good"], label="deletions")
    bottom.set_ylabel("indels (%)")
    bottom.set_xlabel("cycle (position in the read as sequenced)")
    for ax in (top, bottom):
        ax.set_ylim(bottom=0)
        if ax.lines:
            ax.legend(loc="upper left")
    return fig


def duplication_figure(dup: dict, sample: str, marked: bool) -> Figure:
    """The primary reads as unique mapped, duplicates and unmapped: one stacked bar, and the rate."""
    title = (f"{sample}: duplication rate {100 * dup['rate']:.2f}% of mapped reads" if marked
             else f"{sample}: duplicates not marked (bam.mark_duplicates is off)")
    fig, ax = new_figure(title, (8, 2.6))
    left = 0
    primary = max(dup["primary"], 1)
    for key, colour in (("unique", COLOURS["main"]), ("duplicates", COLOURS["second"]),
                        ("unmapped", COLOURS["third"])):
        ax.barh([0], [dup[key]], left=left, color=colour,
                label=f"{key} {dup[key]:,} ({100 * dup[key] / primary:.2f}%)")
        left += dup[key]
    ax.set_yticks([])
    ax.set_xlim(0, primary)
    ax.xaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    ax.set_xlabel("primary reads")
    fig.legend(loc="outside lower center", ncol=3, frameon=False)
    return fig


def throughput_figure(summary: dict, sample: str) -> Figure:
    """Reads per second of each stage of gpualign map (reads over the stage's seconds summed over
    threads: one thread's rate), and end to end (reads over wall seconds), log scale."""
    rates = stage_rates(summary)
    wall = summary["reads"] / summary["seconds"] if summary["seconds"] > 0 else 0.0
    names = ["end to end (wall)"] + list(rates)
    values = [wall] + list(rates.values())
    seconds = [summary["seconds"]] + [summary["stage_seconds"][s] for s in rates]
    fig, ax = new_figure(f"{sample}: gpualign map, {summary['reads']:,} reads, {wall:,.0f} reads/s "
                         f"({summary['backend']})", (9, 1.4 + 0.35 * len(names)))
    y = np.arange(len(names))[::-1]
    colours = [COLOURS["second"]] + [COLOURS["main"]] * len(rates)
    ax.barh(y, values, color=colours)
    for yi, value, sec in zip(y, values, seconds):
        ax.text(value, yi, f" {value:,.0f}/s ({sec:.2f} s)", va="center", fontsize=8)
    ax.set_yticks(y, names)
    if any(v > 0 for v in values):
        ax.set_xscale("log")
        ax.set_xlim(min(v for v in values if v > 0) / 2, max(values) * 30)   # room for the labels
    ax.set_xlabel("reads per second (stage: per thread)")
    return fig


def sample_figures(sections: dict, flagstat: dict, coverage_rows: list, summary: dict, sample: str,
                   duplicates_marked: bool) -> dict:
    """Every plot of a sample but the insert sizes, by name: mapq, coverage, errors, duplicates,
    throughput (sections: samtools.parse_stats; flagstat: samtools.parse_flagstat; summary: the
    sample's map summary)."""
    return {
        "mapq": mapq_figure(*mapq_histogram(sections), sample),
        "coverage": coverage_figure(coverage_rows, sample),
        "errors": error_rate_figure(error_rates(sections), sample),
        "duplicates": duplication_figure(duplication(flagstat), sample, duplicates_marked),
        "throughput": throughput_figure(summary, sample),
    }


def insert_size_plot(sections: dict, summary: dict, sample: str) -> Figure:
    return insert_size_figure(*insert_sizes(sections), insert_size(summary), sample)


__all__ = ["save_png", "sample_figures", "insert_size_plot", "mapq_figure", "insert_size_figure", "coverage_figure",
           "error_rate_figure", "duplication_figure", "throughput_figure"]
