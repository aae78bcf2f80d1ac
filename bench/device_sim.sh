# Simulators on the lent GPU machine, from the .debs carried in .sim (see gpu_real.sh's header); source it
# after device_env.sh: mason_simulator (and art_illumina, where carried) on PATH.
# the simulators: only their binaries out of the .debs, their libraries beside them, run through a wrapper that
# points at those libraries alone (Debian's libgomp, libgsl; the machine's own libstdc++ and zlib)
mkdir -p /tmp/sim/bin
for deb in .sim/*.deb; do
  case $deb in
    */seqan-apps_*) dpkg-deb --fsys-tarfile "$deb" | tar -x -C /tmp/sim ./usr/lib/seqan/bin/mason_simulator;;
    *) dpkg -x "$deb" /tmp/sim;;
  esac
done
for pair in mason_simulator:/tmp/sim/usr/lib/seqan/bin/mason_simulator art_illumina:/tmp/sim/usr/bin/art_illumina; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' /tmp/sim/usr/lib/x86_64-linux-gnu \
    "${pair#*:}" > "/tmp/sim/bin/${pair%%:*}"
  chmod +x "/tmp/sim/bin/${pair%%:*}"
done
export PATH=/tmp/sim/bin:$PATH
