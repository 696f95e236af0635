"""Forked worker processes for the scraping stages' replayed work: reading the archive, extracting pages, decoding
and encoding images is CPU work, which threads share one core for. A worker starts with what the stage gave it
(``STATE``, inherited through the fork, not pickled: the web resource's replay index is built once, before)."""

import multiprocessing
import signal
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

STATE: dict = {}  # a worker's start values (forked_pool's keywords)
BROKEN = f"error:{BrokenProcessPool.__name__}"  # the drop reason of the work a dead worker took with it


def _start(values: dict) -> None:
    """Every worker: SIGTERM and SIGINT back to their defaults. A fork inherits the parent's Python handlers (a
    Dagster run's, the command's), which only set a flag; then the pool's terminate() after another worker died
    cannot stop a worker blocked on sending its result, and the pool's shutdown waits for it forever."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    STATE.update(values)


def forked_pool(workers: int, **values) -> ProcessPoolExecutor:
    """``workers`` forked processes, each with ``values`` in ``STATE``."""
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"), initializer=_start,
                               initargs=(values,))


def submit(pool: ProcessPoolExecutor, fn, *args) -> Future:
    """``pool.submit``; after a worker died the pool refuses new work, and the work fails like that in flight."""
    try:
        return pool.submit(fn, *args)
    except BrokenProcessPool as err:
        failed: Future = Future()
        failed.set_exception(err)
        return failed
