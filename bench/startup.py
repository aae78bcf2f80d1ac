"""Start-up cost of compiling kernels (BENCHMARKS.md, "Start-up: compiling kernels"): `gpualign map`
of the demo (2,000 reads of lambda phage) on a cold and on a warm numba cache, and
`gpualign compile` ahead of the map.

    python3 bench/startup.py --backend cpu [--out DIR]

Every step is a fresh `python -m gpualign` process, run from a copy of the package taken at the
start (edits of the checkout meanwhile change nothing); each series starts from an empty cache
folder (NUMBA_CACHE_DIR). Columns: wall seconds of the process, compile seconds it reported, mapping
seconds of its "done:" line (the clock the reads/s come from), and the rest (start-up: imports,
loading the index, loading kernels from the cache).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "resources" / "demo"


def run(cache: Path, *args, cwd: Path) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join(
        p for p in (str(cwd / "code"), os.environ.get("PYTHONPATH", "")) if p))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "gpualign", *args], env=env, cwd=cwd, capture_output=True,
                          text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"gpualign {' '.join(args)} failed:\n{proc.stderr}")
    err = proc.stderr
    compiled = re.search(r"compiled kernels in (\d+) s", err) or re.search(r"cache, in ([\d.]+) s", err)
    done = re.search(r"done: (\d+) reads, \d+ mapped, ([\d.]+) s", err)
    return {"wall": wall, "compile": float(compiled.group(1)) if compiled else 0.0,
            "mapping": float(done.group(2)) if done else 0.0, "reads": int(done.group(1)) if done else 0,
            "said_compiling": "compiling kernels for" in err, "log": err}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None, help="folder for startup-BACKEND.json and the logs")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpualign-startup-") as tmp:
        tmp = Path(tmp)
        shutil.copytree(REPO / "gpualign", tmp / "code" / "gpualign", ignore=shutil.ignore_patterns("__pycache__"))
        prefix = str(tmp / "lambda")
        step_index = run(tmp / "cache-index", "index", str(DEMO / "lambda.fa"), "-p", prefix, cwd=tmp)
        print(f"{'index, cold cache (not in the table)':38s} wall {step_index['wall']:6.1f} s", flush=True)
        mapping = ["map", "--backend", args.backend, "-t", str(args.threads), prefix, str(DEMO / "reads.fq.gz"),
                   "-o", str(tmp / "out.bam")]

        def step(name, cache, *argv):
            row = dict(run(cache, *argv, cwd=tmp), step=name)
            rows.append(row)
            print(f"{name:38s} wall {row['wall']:6.1f} s  compile {row['compile']:5.1f} s  "
                  f"mapping {row['mapping']:5.2f} s  start-up {row['wall'] - row['compile'] - row['mapping']:5.1f} s"
                  f"{'  (said: compiling)' if row['said_compiling'] else ''}", flush=True)

        step("map, cold cache", tmp / "cold", *mapping)
        step("map, warm cache", tmp / "cold", *mapping)
        step("compile, empty cache", tmp / "ahead", "compile", "--backend", args.backend)
        step("map after compile", tmp / "ahead", *mapping)
        step("map after compile, again", tmp / "ahead", *mapping)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"startup-{args.backend}.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
