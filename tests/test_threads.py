"""The pipeline helpers of threads.py: ordered_map (a pool's results in input order, with bounded
look-ahead) and in_background (a generator run ahead on a thread of its own)."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from gpualign.threads import in_background, ordered_map


class Boom(Exception):
    pass


def wait_for(condition, timeout=5.0):
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.001)


# ---- ordered_map --------------------------------------------------------------------------------

@pytest.mark.parametrize("workers, ahead", [(1, 1), (3, 2), (4, 8), (8, 100)])
def test_ordered_map_gives_results_in_input_order_whatever_finishes_first(rng, workers, ahead):
    delays = rng.random(60) * 0.004   # later items often finish first

    def square(i):
        time.sleep(delays[i])
        return i * i

    with ThreadPoolExecutor(workers) as pool:
        assert list(ordered_map(pool, square, range(60), ahead)) == [i * i for i in range(60)]
        assert list(ordered_map(pool, square, [], ahead)) == []


@pytest.mark.parametrize("ahead", [1, 2, 5])
def test_ordered_map_keeps_at_most_ahead_items_in_flight(ahead):
    """No more than `ahead` items are drawn and not yet handed out, or running at once, however
    many workers the pool has (the bound on memory)."""
    drawn, running, most = [], [0], [0]
    lock = threading.Lock()

    def items():
        for i in range(40):
            drawn.append(i)
            yield i

    def work(i):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.002)
        with lock:
            running[0] -= 1
        return i

    beyond = []
    with ThreadPoolExecutor(8) as pool:
        for taken, result in enumerate(ordered_map(pool, work, items(), ahead), start=1):
            assert result == taken - 1
            beyond.append(len(drawn) - taken)   # drawn but not yet handed out, besides this one
    assert max(beyond) == ahead - 1 and most[0] <= ahead


def test_ordered_map_hands_out_a_done_result_before_drawing_ahead():
    """The first result goes out once it is done, while later items are not drawn yet: a reader's
    first batch must not wait for `ahead` more to be read."""
    first_taken = threading.Event()

    def items():
        yield 0
        yield 1
        # a slow input: the next item comes only once result 0 was handed out (or never, 2 s on)
        assert first_taken.wait(2), "result 0 was held back until more items were drawn"
        yield from range(2, 6)

    def work(i):
        return i

    with ThreadPoolExecutor(4) as pool:
        out = []
        for result in ordered_map(pool, work, items(), 5):
            out.append(result)
            first_taken.set()
    assert out == list(range(6))


def test_an_error_from_fn_is_raised_in_its_items_place():
    def work(i):
        time.sleep(0.001 * (10 - i % 10))   # later items finish first
        if i == 6:
            raise Boom(i)
        return i

    got = []
    with ThreadPoolExecutor(4) as pool, pytest.raises(Boom, match="^6$"):
        for result in ordered_map(pool, work, range(20), 4):
            got.append(result)
    assert got == [0, 1, 2, 3, 4, 5]


def test_an_error_from_the_items_comes_after_the_results_of_the_items_before_it():
    def items():
        yield from range(5)
        raise Boom("bad input")

    def slow(i):
        time.sleep(0.01)   # still running when the items fail
        return i

    got = []
    with ThreadPoolExecutor(2) as pool, pytest.raises(Boom, match="bad input"):
        for result in ordered_map(pool, slow, items(), 10):
            got.append(result)
    assert got == [0, 1, 2, 3, 4]


def test_stopping_early_cancels_the_work_not_started():
    started = []

    def work(i):
        started.append(i)
        time.sleep(0.02)
        return i

    with ThreadPoolExecutor(1) as pool:
        results = ordered_map(pool, work, range(100), 5)
        assert next(results) == 0
        results.close()
    assert started in ([0], [0, 1])   # item 1 may have started on the one worker; 2-4 never do


# ---- in_background ------------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [1, 3, 50])
def test_in_background_gives_every_item_in_order_from_another_thread(rng, depth):
    threads = set()
    values = rng.integers(0, 1000, size=200).tolist()

    def produce():
        for v in values:
            threads.add(threading.get_ident())
            yield v

    assert list(in_background(produce(), depth)) == values
    assert threads and threading.get_ident() not in threads


@pytest.mark.parametrize("depth", [1, 4])
def test_in_background_runs_at_most_depth_items_ahead(depth):
    """The producer fills the queue (depth items) and holds one more, then waits for the consumer."""
    produced = []

    def produce():
        for i in range(1000):
            produced.append(i)
            yield i

    items = in_background(produce(), depth)
    for taken in range(1, 4):
        assert next(items) == taken - 1
        wait_for(lambda: len(produced) == taken + depth + 1)
        time.sleep(0.05)
        assert len(produced) == taken + depth + 1
    items.close()


@pytest.mark.parametrize("error", [Boom("in the generator"), KeyboardInterrupt("in the generator")])
def test_an_error_in_the_background_generator_is_raised_in_its_place(error):
    def produce():
        yield from range(5)
        raise error

    got = []
    with pytest.raises(type(error), match="in the generator"):
        for item in in_background(produce(), 2):
            got.append(item)
    assert got == [0, 1, 2, 3, 4]


def test_closing_early_stops_the_thread_and_closes_the_generator():
    closed = threading.Event()

    def produce():
        try:
            i = 0
            while True:   # endless: only the stop signal ends it
                yield i
                i += 1
        finally:
            closed.set()

    before = threading.active_count()
    items = in_background(produce(), 2)
    assert [next(items), next(items)] == [0, 1]
    start = time.monotonic()
    items.close()
    assert time.monotonic() - start < 2
    assert closed.is_set() and threading.active_count() == before



FAULTS_OF_A_REUSED_ARRAY = """
import resource, sys
import numpy as np
from gpualign.heap import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
for _ in range(2):
    a = np.empty(64 << 20, dtype=np.uint8)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    a[:] = 1                      # touch every page
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del a
print(faults)
"""


def test_glibc_keeps_freed_memory_so_a_batch_does_not_page_fault_again():
    """heap.keep_freed_memory (map's first step): a second 64 MB array, after the first is freed,
    touches memory already mapped (a handful of page faults), where by default it faults every page
    (every huge page, where the kernel gives them)."""
    import subprocess
    import sys
    faults = {mode: int(subprocess.run([sys.executable, "-c", FAULTS_OF_A_REUSED_ARRAY, mode], check=True,
                                       capture_output=True, text=True).stdout) for mode in ("keep", "default")}
    assert faults["default"] > 100 and 4 * faults["keep"] < faults["default"], faults   # (fewer with huge pages)
