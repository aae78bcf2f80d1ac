"""The `rng` fixture of conftest.py: a seed fixed per test, shown in the report of a test that
fails, and GPUALIGN_TEST_SEED to reproduce a failure or explore other inputs."""

import re
from pathlib import Path

import numpy as np
import pytest

CONFTEST = (Path(__file__).parent / "conftest.py").read_text()

INNER = """
import pytest

def test_fails(rng):
    assert int(rng.integers(1 << 40)) < 0

def test_passes(rng):
    assert 0 <= rng.random() < 1

@pytest.mark.seed(99)
def test_fails_with_its_own_seed(rng):
    assert int(rng.integers(1 << 40)) < 0
"""


def run(pytester, *args):
    """Runs INNER under this conftest: {test name: (seed reported, value drawn)} of the failures."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=1, failed=2)
    parts = re.split(r"\n_{3,} (\w+) _{3,}\n", result.stdout.str().split("short test summary")[0])
    failures = {}
    for name, block in zip(parts[1::2], parts[2::2]):
        seed = re.search(rf"(?m)^seed (\d+): GPUALIGN_TEST_SEED=\1 pytest 'test_inner.py::{name}' draws the same inputs$",
                         block)
        drawn = re.search(r"(?m)^E +assert (\d+) < 0$", block)
        assert seed and drawn, block
        failures[name] = (int(seed[1]), int(drawn[1]))
    assert failures.keys() == {"test_fails", "test_fails_with_its_own_seed"}
    assert result.stdout.str().count("random inputs") == 2   # none for the test that passed
    return failures


def first_draw(seed):
    return int(np.random.default_rng(seed).integers(1 << 40))


def test_a_failing_test_reports_the_seed_that_draws_its_inputs(pytester, monkeypatch):
    monkeypatch.delenv("GPUALIGN_TEST_SEED", raising=False)
    failures = run(pytester, "--show-capture=no")
    assert all(first_draw(seed) == value for seed, value in failures.values())
    assert failures["test_fails_with_its_own_seed"][0] == 99
    assert run(pytester) == failures   # fixed per test: every run draws the same inputs


def test_the_variable_sets_every_seed_or_draws_fresh_ones(pytester, monkeypatch):
    monkeypatch.setenv("GPUALIGN_TEST_SEED", "12345")
    assert run(pytester) == {name: (12345, first_draw(12345)) for name in ("test_fails", "test_fails_with_its_own_seed")}
    monkeypatch.setenv("GPUALIGN_TEST_SEED", "random")
    a, b = run(pytester), run(pytester)
    assert all(first_draw(seed) == value for seed, value in [*a.values(), *b.values()])
    assert a != b


def test_a_bad_seed_is_a_usage_error(pytester, monkeypatch):
    monkeypatch.setenv("GPUALIGN_TEST_SEED", "0x1f")
    pytester.makeconftest(CONFTEST)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "GPUALIGN_TEST_SEED='0x1f': give a non-negative integer seed, or 'random'" in result.stderr.str()
