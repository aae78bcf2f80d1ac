# Benchmarks only: launch parameters of gpualign's CUDA kernels set for one process, to time a launch shape
# without editing the package. GPUALIGN_BENCH_LAUNCH="NAME=VALUE,NAME=VALUE" names launch.py's constants:
#   ENV_C="PYTHONPATH=/tmp/site:$PWD:$PWD/bench/launch_probe GPUALIGN_BENCH_LAUNCH=SEED_FIRST_THREADS=64" bash bench/gpu_ab.sh
# Compile-time sizes (launch.py says which) must not be set this way.
import os

_spec = os.environ.get("GPUALIGN_BENCH_LAUNCH", "")
if _spec:
    from gpualign.backends import launch as _launch
    for _item in _spec.split(","):
        _name, _value = _item.split("=")
        if not hasattr(_launch, _name):
            raise SystemExit(f"GPUALIGN_BENCH_LAUNCH: launch.py has no {_name}")
        setattr(_launch, _name, int(_value))
    print(f"[launch probe] {_spec}", flush=True)
