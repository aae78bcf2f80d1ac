"""Test session set-up: CUDA kernels in numba's simulator, and seeded random inputs.

No GPU here, so CUDA kernels run in numba's simulator. The simulator must be switched on before
numba.cuda is first imported; on a real GPU machine run the tests with NUMBA_ENABLE_CUDASIM=0 to
check the compiled kernels with the same tests.

Random inputs come from the `rng` fixture, a numpy Generator whose seed is fixed per test (derived
from the test's node id, so every run draws the same inputs) and shown in the report of a test
that fails. GPUALIGN_TEST_SEED=<n> gives every test seed n instead (to reproduce a failure, or to
explore other inputs), GPUALIGN_TEST_SEED=random a fresh seed per test. `@pytest.mark.seed(n)`
fixes a test's default seed where it needs one particular input (the variable still overrides it).
"""

import os
import secrets
import zlib

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

# pytest may have imported numba already (the warning filters in pyproject name a numba class)
from numba.core import config as _numba_config  # noqa: E402

_numba_config.reload_config()

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest_plugins = ["pytester"]

SEED_ENV = "GPUALIGN_TEST_SEED"
SEED_KEY = pytest.StashKey[int]()


def pytest_configure(config):
    config.addinivalue_line("markers", "seed(n): the test's default random seed (GPUALIGN_TEST_SEED overrides it)")
    given = os.environ.get(SEED_ENV, "").strip()
    if given and given != "random" and not given.isdigit():
        raise pytest.UsageError(f"{SEED_ENV}={given!r}: give a non-negative integer seed, or 'random'")


def seed_of(node) -> int:
    """The seed of a test's random inputs: GPUALIGN_TEST_SEED if set, else the test's seed marker,
    else a hash of its node id (stable across runs and machines)."""
    given = os.environ.get(SEED_ENV, "").strip()
    if given == "random":
        return secrets.randbits(32)
    if given:
        return int(given)
    marker = node.get_closest_marker("seed")
    if marker is not None:
        return int(marker.args[0])
    return zlib.crc32(node.nodeid.encode())


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A numpy Generator seeded for this test; the seed is reported if the test fails."""
    seed = seed_of(request.node)
    request.node.stash[SEED_KEY] = seed
    request.node.user_properties.append(("random seed", seed))   # for --junitxml
    return np.random.default_rng(seed)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    seed = item.stash.get(SEED_KEY, None)
    if report.failed and seed is not None:
        text = f"seed {seed}: {SEED_ENV}={seed} pytest '{item.nodeid}' draws the same inputs"
        if hasattr(report.longrepr, "addsection"):   # shown whatever --show-capture says
            report.longrepr.addsection("random inputs", text)
        else:
            report.sections.append(("random inputs", text))
    return report


# the simulator runs a Python thread a CUDA thread: launches patched this small take several blocks even on
# tiny inputs, and run in seconds (never the compile-time sizes, launch.CLOSE_SHARED_THREADS and the like)
SMALL_LAUNCHES = {"THREADS_PER_BLOCK": 4, "CLOSE_THREADS": 4, "CLOSE_BLOCKS": 2, "TRACE_BLOCKS": 2,
                  "SEED_FIRST_THREADS": 4, "SEED_SPILL_THREADS": 3, "SEED_FIRST_BLOCKS": 3, "SEED_SHARED_BLOCKS": 3}


@pytest.fixture
def small_launches(monkeypatch):
    """The CUDA kernels launched in small blocks (SMALL_LAUNCHES) for this test."""
    from gpualign.backends import launch
    for name, value in SMALL_LAUNCHES.items():
        monkeypatch.setattr(launch, name, value)


@pytest.fixture(params=["cpu", "cuda"])
def backend(request):
    """Each backend module: cpu, and cuda in numba's simulator (launch configuration patched small,
    so even tiny inputs take several blocks)."""
    from gpualign.backends import cpu, cuda
    if request.param == "cuda":
        request.getfixturevalue("small_launches")
        return cuda
    return cpu


@pytest.fixture
def world(rng):
    """(rng, genome, seqs, index): two random contigs with a 120 bp repeat, and their k=8 index."""
    from gpualign.index import build_index
    from helpers import random_genome
    genome, seqs = random_genome(rng, lengths=(1500, 700), repeat=120)
    index = build_index(genome, k=8, max_occ=50)
    return rng, genome, seqs, index
