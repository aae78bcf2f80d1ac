"""multiqc: every sample's QC files (samtools stats, flagstat, idxstats, the gpualign map table) ->
MultiQC's report. MultiQC runs as a command of its own: its environment (envs/multiqc.yaml, or a
`pip install multiqc` of its own) is not the aligner's."""

import os
import shutil
import subprocess
import sys

sys.stderr = log = open(snakemake.log[0], "w", buffering=1)

from gpualign.errors import InputError, job_errors  # noqa: E402

NAMES = ("multiqc_report.html", "multiqc_data")   # what MultiQC writes into its --outdir

out = snakemake.output
if os.path.dirname(out.data) != os.path.dirname(out.report) or (os.path.basename(out.report),
                                                                os.path.basename(out.data)) != NAMES:
    raise ValueError(f"multiqc: outputs must be MultiQC's own names in one folder, {NAMES}: "
                     f"got {out.report}, {out.data}")
with job_errors(snakemake.rule, log, out.report):
    multiqc = shutil.which("multiqc")
    if multiqc is None:
        raise InputError("qc.multiqc: no multiqc command on PATH (pip install multiqc, or run with --use-conda)")
    outdir = os.path.dirname(out.report)
    file_list = os.path.join(outdir, "files.txt")   # the inputs exactly: MultiQC would search folders
    os.makedirs(outdir, exist_ok=True)
    with open(file_list, "w") as fh:
        fh.writelines(f"{path}\n" for path in snakemake.input)
    command = [multiqc, "--force", "--no-version-check", "--outdir", outdir, "--file-list", file_list]
    print(" ".join(command), file=log)
    done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    os.unlink(file_list)
    if done.returncode != 0:
        raise InputError(f"multiqc failed (exit status {done.returncode}); its output is in {snakemake.log[0]}")
