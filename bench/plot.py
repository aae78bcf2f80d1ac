#!/usr/bin/env python3
"""Figures from the device benchmarks' JSON (run here, not on the device; needs matplotlib).

    python bench/plot.py RESULTS.json ... [--outdir bench/results]

scaling.py's files give scaling_genome.png (by genome size: reads/s, peak host and GPU
memory, index build time and size) and scaling_reads.png (by read count: reads/s, wall time,
peak memory); end_to_end.py's files give end_to_end.png (reads/s and accuracy per aligner).
The figures go beside the JSON they plot, in bench/results/, unless --outdir says otherwise.
Where several files hold the same point, the later file on the command line wins.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402,F401

GIB = 1024.0   # MiB per GiB


def load(paths: list[Path]) -> tuple[dict, list[dict], str]:
    """Scaling points by (part, genome, reads), end-to-end records, and a machine label."""
    points, runs, machine = {}, [], ""
    for path in paths:
        data = json.loads(path.read_text())
        machine = data.get("machine", {}).get("gpu") or machine
        if data.get("script") == "scaling":
            for p in data["points"]:
                points[(p["part"], p["genome_mbp"], p["reads"])] = p
        elif data.get("script") == "end_to_end":
            runs.append(data)
    return points, runs, machine.split(",")[0]


def annotate(ax, xs, ys, fmt="{:,.0f}"):
    for x, y in zip(xs, ys):
        if y is not None:
            ax.annotate(fmt.format(y), (x, y), textcoords="offset points", xytext=(0, 5),
                        ha="center", fontsize=7)


def memory_panel(ax, xs, pts):
    host = [p["peak_rss_mb"] / GIB for p in pts]
    ax.plot(xs, host, "o-", label="host RSS (process tree)")
    gpu = [p.get("peak_gpu_mb") for p in pts]
    if any(g is not None for g in gpu):
        ax.plot(xs, [g / GIB if g is not None else float("nan") for g in gpu], "s-", label="GPU")
    ax.set_ylabel("peak memory (GiB)")
    ax.legend(fontsize=8)


def count_label(x: float) -> str:
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:g}{suffix}"
    return f"{x:g}"


def finish(fig, axes, xs, xlabel, title, path: Path):
    """Log x axis ticked at the measured values only, with plain labels."""
    for ax in axes.flat:
        ax.set_xscale("log")
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xticks(xs, [count_label(x) for x in xs])
        ax.set_xlabel(xlabel)
        ax.set_ylim(bottom=0)   # all quantities are sizes or rates: keep zero in view
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}", file=sys.stderr)


def one_series(pts: list[dict], fixed: str) -> list[dict]:
    """The points sharing the most common value of `fixed` (ties: the largest value), so a
    line never mixes, say, genome points measured with different read counts."""
    values = [p[fixed] for p in pts]
    keep = max(set(values), key=lambda v: (values.count(v), v))
    if len(set(values)) > 1:
        print(f"plotting {fixed}={keep} only; other points: {sorted(set(values) - {keep})}", file=sys.stderr)
    return [p for p in pts if p[fixed] == keep]


def plot_genomes(pts: list[dict], machine: str, path: Path):
    pts = sorted(one_series(pts, "reads"), key=lambda p: p["genome_mbp"])
    xs = [p["genome_mbp"] for p in pts]
    fig, axes = plt.subplots(2, 2, figsize=(9, 7))
    rps = [p["reads_per_s"] for p in pts]
    axes[0, 0].plot(xs, rps, "o-")
    annotate(axes[0, 0], xs, rps)
    axes[0, 0].set_ylabel("reads/s (FASTQ.gz -> sorted BAM)")
    memory_panel(axes[0, 1], xs, pts)
    secs = [p["index_s"] for p in pts]
    axes[1, 0].plot(xs, secs, "o-")
    for x, sec, p in zip(xs, secs, pts):
        axes[1, 0].annotate(f"{sec:.1f} s, k={p['k']}", (x, sec), textcoords="offset points",
                            xytext=(0, 5), ha="center", fontsize=7)
    axes[1, 0].set_ylabel("index build (s)")
    size = [p["index_bytes"] / 2 ** 30 for p in pts]
    axes[1, 1].plot(xs, size, "o-", label="on disk")
    axes[1, 1].plot(xs, [p["index_peak_rss_mb"] / GIB for p in pts], "s--", label="peak RSS while building")
    axes[1, 1].set_ylabel("index (GiB)")
    axes[1, 1].legend(fontsize=8)
    reads = pts[0]["reads"]
    finish(fig, axes, xs, "genome size (Mbp)",
           f"gpualign by genome size, {reads:,} reads of {pts[0]['length']} bp  {machine}", path)


def plot_reads(pts: list[dict], machine: str, path: Path):
    pts = sorted(one_series(pts, "genome_mbp"), key=lambda p: p["reads"])
    xs = [p["reads"] for p in pts]
    fig, axes = plt.subplots(1, 3, figsize=(12, 4))
    rps = [p["reads_per_s"] for p in pts]
    axes[0].plot(xs, rps, "o-")
    annotate(axes[0], xs, rps)
    axes[0].set_ylabel("reads/s (FASTQ.gz -> sorted BAM)")
    wall = [p["wall_s"] for p in pts]
    axes[1].plot(xs, wall, "o-")
    annotate(axes[1], xs, wall, "{:.1f}")
    axes[1].set_ylabel("wall time (s)")
    memory_panel(axes[2], xs, pts)
    finish(fig, axes, xs, "reads", f"gpualign by read count, {pts[0]['genome_mbp']:g} Mbp genome, "
           f"{pts[0]['length']} bp reads  {machine}", path)


def plot_end_to_end(runs: list[dict], machine: str, path: Path):
    """Per aligner, the latest measurement for each genome size."""
    by_genome: dict[str, dict] = {}
    for run in runs:
        label = f"{float(run['args']['genome_mbp']):g} Mbp, {int(run['args']['reads']):,} reads"
        for name, r in run["results"].items():
            if "error" not in r:
                by_genome.setdefault(label, {})[name] = r
    labels = sorted(by_genome)
    names = sorted({n for g in by_genome.values() for n in g}, key=lambda n: (n != "gpualign", n))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        xs = [j + i * width for j in range(len(labels))]
        rps = [by_genome[g].get(name, {}).get("reads_per_s", 0) for g in labels]
        axes[0].bar(xs, rps, width, label=name)
        annotate(axes[0], xs, rps)
        acc = [(by_genome[g].get(name, {}).get("accuracy") or {}).get("correct_pct", 0) for g in labels]
        axes[1].bar(xs, acc, width, label=name)
        annotate(axes[1], xs, acc, "{:.2f}")
    for ax in axes:
        ax.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(labels))], labels)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("reads/s (FASTQ.gz -> sorted, indexed BAM)")
    axes[0].set_yscale("log")
    axes[1].set_ylabel("reads within 5 bp of their origin (%)")
    low = min([a for g in by_genome.values() for r in g.values()
               for a in [(r.get("accuracy") or {}).get("correct_pct")] if a] or [90])
    axes[1].set_ylim(max(0, low - 2), 100)
    fig.suptitle(f"End to end on synthetic genomes  {machine}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}", file=sys.stderr)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("json", nargs="+", type=Path, help="JSON files from scaling.py and end_to_end.py")
    p.add_argument("--outdir", type=Path, default=Path(__file__).resolve().parent / "results",
                   help="folder of the PNG files [bench/results]")
    args = p.parse_args(argv)
    points, runs, machine = load(args.json)
    args.outdir.mkdir(parents=True, exist_ok=True)
    genomes = [pt for (part, _, _), pt in points.items() if part == "genomes"]
    reads = [pt for (part, _, _), pt in points.items() if part == "reads"]
    if genomes:
        plot_genomes(genomes, machine, args.outdir / "scaling_genome.png")
    if reads:
        plot_reads(reads, machine, args.outdir / "scaling_reads.png")
    if runs:
        plot_end_to_end(runs, machine, args.outdir / "end_to_end.png")
    if not (genomes or reads or runs):
        print("no scaling or end_to_end results in the given files", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
