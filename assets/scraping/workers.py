"""Forked worker processes for the scraping stages' replayed work: reading the archive, extracting pages, decoding
and encoding images is CPU work, which threads share one core for. A worker starts with what the stage gave it
(``STATE``, inherited through the fork, not pickled: the web resource's replay index is built once, before)."""

import multiprocessing
import signal
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from assets.stage.record_errors import RecordError

STATE: dict = {}  # a worker's start values (forked_pool's keywords)
BROKEN = f"error:{BrokenProcessPool.__name__}"  # the drop reason of the work a dead worker took with it
WORKER_DIED = "worker_died"  # the drop reason of an item that killed its worker on its own


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


def in_chunks(pool: ProcessPoolExecutor, fn, items: list, size: int, web, failed, log=None, progress=None) -> list:
    """``fn(chunk) -> (outcomes, fetch-log entries)`` over ``items`` in chunks of ``size`` on ``pool``: the outcomes
    in input order, the entries added to ``web``'s fetch log. A chunk whose worker died (killed for memory) gives
    ``failed(reason)`` for each of its items (``BROKEN``: see ``retry_dead``), not the stage's failure. With
    ``log``, the line ``progress(items done)`` about every 256 items."""
    chunks = [items[start: start + size] for start in range(0, len(items), size)]
    futures = [submit(pool, fn, chunk) for chunk in chunks]
    outcomes: list = []
    for chunk, future in zip(chunks, futures):
        error = future.exception()
        if error:
            outcomes += [failed(RecordError.of(error))] * len(chunk)
        else:
            done, entries = future.result()
            outcomes += done
            web.extend_fetch_log(entries)
        if log and (len(outcomes) % 256 < size or len(outcomes) == len(items)):
            log.info(progress(len(outcomes)))
    return outcomes


def retry_dead(outcomes: list, items: list, new_pool, work, died, log=None, stage: str = "", noun: str = "items"
               ) -> None:
    """In place: the items whose worker died (reason ``BROKEN``, each outcome's second field: every item it had in
    flight or queued failed with it), again one at a time, each in a single worker (``new_pool()``, ``work(pool,
    item)``) that a death replaces, so an item that kills its worker loses only itself (``died``)."""
    broken = [i for i, outcome in enumerate(outcomes) if outcome[1] == BROKEN]
    if broken and log:
        log.warning(f"{stage}: a worker process died; trying its {len(broken)} {noun} again one at a time")
    pool = None
    try:
        for i in broken:
            pool = pool or new_pool()
            try:
                outcomes[i] = work(pool, items[i])
            except BrokenProcessPool:
                pool.shutdown(cancel_futures=True)
                pool = None
                outcomes[i] = died
    finally:
        if pool:
            pool.shutdown()


def alone(pool: ProcessPoolExecutor, fn, item, web):
    """``fn([item])`` (a chunk function of ``in_chunks``) on ``pool``: the item's outcome, its fetch-log entries
    added to ``web``'s log (``retry_dead``'s ``work``, replayed)."""
    done, entries = pool.submit(fn, [item]).result()
    web.extend_fetch_log(entries)
    return done[0]
