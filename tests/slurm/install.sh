#!/usr/bin/env bash
# Install Slurm (slurmctld, slurmd, client commands) and MUNGE for tests/slurm, if missing.
# Idempotent; needs root (CI runs as root). Starts nothing: tests/slurm/cluster.py runs its own
# daemons with their own config, key and socket, so the packages' services stay off.
set -euo pipefail

have_all() {
    local b
    for b in munged munge unmunge slurmctld slurmd sbatch squeue sinfo scontrol scancel sacct; do
        PATH="$PATH:/usr/sbin:/sbin" command -v "$b" >/dev/null 2>&1 || return 1
    done
}

if have_all; then
    echo "slurm and munge already installed"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "tests/slurm/install.sh: needs root to apt-get install slurm-wlm munge" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Keep the packages' postinst from starting a system munged (and trying slurmd/slurmctld) where
# there is no policy already saying so: the tests start their own, and nothing should linger.
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
have_all || { echo "tests/slurm/install.sh: slurm/munge still missing after install" >&2; exit 1; }
echo "installed: $(PATH="$PATH:/usr/sbin" slurmctld -V)"
