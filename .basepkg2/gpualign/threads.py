"""Two small pipeline pieces shared by reading (fastq) and writing (bam.sort): results of a pool in
order with bounded look-ahead, and a generator run ahead on a thread of its own."""

import collections
import queue
import threading
import weakref


def ordered_map(pool, fn, items, ahead: int):
    """fn over items on the pool, results in order, at most `ahead` in flight (bounded memory), each
    handed out as soon as it and those before it are done and the next item has been drawn.

    An exception from `items` itself is raised after the results of the items before it, so
    the failures come out in sequence order; an exception from fn is raised in its item's place.
    """
    jobs = collections.deque()
    source = iter(items)
    try:
        while True:
            try:
                item = next(source)
            except StopIteration:
                break
            except Exception:
                while jobs:
                    yield jobs.popleft().result()
                raise
            jobs.append(pool.submit(fn, item))
            # a result that is ready goes out now, not once `ahead` items are drawn: the first batch
            # maps while the input behind it is still being read
            while jobs and (len(jobs) >= ahead or jobs[0].done()):
                yield jobs.popleft().result()
        while jobs:
            yield jobs.popleft().result()
    finally:
        for job in jobs:
            job.cancel()


def in_background(generator, depth: int, start_now: bool = False):
    """The generator's items, produced on a thread of their own up to `depth` ahead; an
    exception it raises is raised here, in its place in the sequence. The thread starts at the
    first item taken, or at once with start_now (two inputs read side by side from the start); it
    is stopped when the items are closed or dropped, taken or not."""
    items = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def offer(item) -> bool:
        while not stop.is_set():
            try:
                items.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce():
        try:
            for item in generator:
                if not offer(item):
                    return
            offer(done)
        except BaseException as exc:  # handed to the consumer
            offer(exc)
        finally:
            generator.close()   # closes the input now, not at interpreter exit (rapidgzip aborts then)

    thread = threading.Thread(target=produce, daemon=True)

    def taken():
        if not thread.is_alive() and not start_now:
            thread.start()
        try:
            while True:
                item = items.get()
                if item is done:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            thread.join()

    out = taken()
    if start_now:
        thread.start()
        weakref.finalize(out, stop.set)   # a generator never started runs no finally
    return out
